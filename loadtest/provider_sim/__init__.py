"""The payment provider simulator (`python -m loadtest.provider_sim.server`): its own protocol
and Stripe's wire format, with late, duplicate and out-of-order callbacks."""
