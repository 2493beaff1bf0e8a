"""The buyer's side of the simulator's Stripe wire (ADR 0039): a stand-in for Stripe.js, served
at /v3/ as Stripe serves it at https://js.stripe.com/v3/, and the two calls it makes, so a
browser test runs a whole purchase, 3-D Secure included, with no network.

It speaks the part of Stripe.js the buyer's page uses: `Stripe(publishable_key)`,
`elements({clientSecret})`, `create("payment").mount(target)` (a card number field where Stripe
draws its Payment Element in a frame) and `confirmPayment({elements, redirect: "if_required"})`,
which resolves `{paymentIntent}` or `{error}` as Stripe.js does. With SimConfig.buyer_confirms
an intent waits for that confirm; Stripe's test cards decide it:

- 4000 0027 6000 3184 asks for 3-D Secure: the intent `requires_action`, and the stand-in shows
  its challenge (a modal dialog named "3-D Secure" with "Complete authentication" and "Fail
  authentication", as Stripe's test page has), then posts the answer;
- 4000 0000 0000 0002 is declined (`card_declined`);
- any other 16 digits pay; anything else is refused in the page (`validation_error`, as
  Stripe.js does) and the intent keeps waiting.

Every decision after the confirm goes the simulator's usual way: its outcome after a delay,
announced by signed events (payment_intent.succeeded, payment_intent.payment_failed). The
calls are "simple" cross-origin requests (form-encoded, the publishable key in the body, as
Stripe.js sends them), answered with Access-Control-Allow-Origin: *."""

from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from loadtest.provider_sim import stripe as wire
from loadtest.provider_sim.attempt import Attempt
from loadtest.provider_sim.charges import Simulator
from loadtest.provider_sim.stripe_api import error, ok

CARD_3DS = "4000002760003184"
CARD_DECLINED = "4000000000000002"
CORS = {"Access-Control-Allow-Origin": "*"}


class StripeJs:
    def __init__(self, sim: Simulator, publishable_key: str) -> None:
        self.sim, self.publishable_key = sim, publishable_key

    def routes(self) -> list[Route]:
        return [
            Route("/v3/", self.script, methods=["GET"]),
            Route("/v1/payment_intents/{id}/confirm", self.confirm, methods=["POST"]),
            Route("/v1/payment_intents/{id}/authenticate", self.authenticate, methods=["POST"]),
        ]

    async def script(self, request: Request) -> Response:
        return Response(STRIPE_JS, media_type="text/javascript", headers=CORS)

    async def _attempt(self, request: Request, stage: str) -> tuple[Attempt, dict[str, Any]]:
        """The intent's waiting attempt named by the call, checked as Stripe checks it: the
        publishable key, then the client secret of that intent, then its state."""
        form = dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
        intent_id = request.path_params["id"]
        if form.get("key") != self.publishable_key or not self.publishable_key:
            raise Refused(401, "invalid_request_error", "Invalid API Key provided")
        if intent_id not in self.sim.by_intent or form.get("client_secret") != wire.client_secret(
            intent_id
        ):
            raise Refused(404, "invalid_request_error", f"No such payment_intent: '{intent_id}'")
        a = wire.focus(self.sim, intent_id)
        if a.stage != stage:
            why = f"This PaymentIntent's status is {wire.intent(a)['status']}"
            raise Refused(400, "invalid_request_error", why, "payment_intent_unexpected_state")
        return a, form

    def _decide(self, a: Attempt, outcome: str) -> None:
        a.stage = ""
        self.sim.spawn(self.sim.decide(a, outcome, self.sim.delay_s()))

    async def confirm(self, request: Request) -> Response:
        try:
            a, form = await self._attempt(request, "requires_payment_method")
        except Refused as r:
            return r.response()
        number = form.get("payment_method_data[card][number]", "").replace(" ", "")
        if not (number.isdigit() and len(number) == 16):
            return Refused(402, "card_error", "Your card number is incorrect.",
                           "incorrect_number").response()  # fmt: skip
        if number == CARD_3DS:
            a.stage = "requires_action"
        elif number == CARD_DECLINED:
            self._decide(a, "declined")
            return Refused(402, "card_error", "Your card was declined.", "card_declined").response()
        else:
            self._decide(a, "captured")
        return ok(wire.intent(a), **CORS)

    async def authenticate(self, request: Request) -> Response:
        try:
            a, form = await self._attempt(request, "requires_action")
        except Refused as r:
            return r.response()
        if form.get("result") != "complete":
            self._decide(a, "failed")
            why = "We are unable to authenticate your payment method."
            return Refused(402, "invalid_request_error", why,
                           "payment_intent_authentication_failure").response()  # fmt: skip
        self._decide(a, "captured")
        return ok(wire.intent(a), **CORS)


class Refused(Exception):
    def __init__(self, status: int, kind: str, message: str, code: str = "") -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.code = status, kind, message, code

    def response(self) -> Response:
        return error(self.status, self.kind, self.message, self.code, **CORS)


STRIPE_JS = r"""// A stand-in for Stripe.js v3, served by the payment simulator
// (loadtest/provider_sim/stripe_js.py): the part of it the buyer's page uses, talking to the
// simulator that served it.
(function () {
  "use strict";
  const base = new URL(document.currentScript.src).origin;

  async function post(path, fields) {
    const r = await fetch(base + path, { method: "POST", body: new URLSearchParams(fields) });
    return { status: r.status, body: await r.json() };
  }

  function button(text, value, done) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.addEventListener("click", () => done(value));
    return b;
  }

  // Stripe's 3-D Secure test page, as a modal dialog: the buyer completes or fails it.
  function challenge() {
    return new Promise((resolve) => {
      const dialog = document.createElement("dialog");
      dialog.setAttribute("aria-label", "3-D Secure");
      const text = document.createElement("p");
      text.textContent = "3-D Secure test page: your bank asks you to confirm this payment.";
      const done = (value) => { dialog.close(); dialog.remove(); resolve(value); };
      dialog.append(text, button("Complete authentication", "complete", done),
        button("Fail authentication", "fail", done));
      document.body.append(dialog);
      dialog.showModal();
    });
  }

  window.Stripe = function (key) {
    return {
      elements(options) {
        let field = null;
        return {
          clientSecret: options.clientSecret,
          number: () => (field ? field.value : ""),
          create() {
            return {
              mount(target) {
                const host = typeof target === "string" ? document.querySelector(target) : target;
                const label = document.createElement("label");
                label.textContent = "Card number";
                field = document.createElement("input");
                field.name = "cardnumber";
                field.autocomplete = "cc-number";
                field.inputMode = "numeric";
                label.append(field);
                host.replaceChildren(label);
              },
              destroy() { if (field) field.closest("label").remove(); field = null; },
            };
          },
        };
      },
      async confirmPayment({ elements }) {
        // As Stripe.js: a number that cannot be a card never leaves the page.
        if (!/^\d{16}$/.test(elements.number().replace(/\s+/g, ""))) {
          return { error: { type: "validation_error", code: "invalid_number",
            message: "Your card number is invalid." } };
        }
        const secret = elements.clientSecret;
        const id = secret.split("_secret_")[0];
        const fields = { key, client_secret: secret };
        let r = await post(`/v1/payment_intents/${id}/confirm`,
          { ...fields, "payment_method_data[card][number]": elements.number() });
        if (r.status === 200 && r.body.status === "requires_action") {
          const result = await challenge();
          r = await post(`/v1/payment_intents/${id}/authenticate`, { ...fields, result });
        }
        return r.status === 200 ? { paymentIntent: r.body } : { error: r.body.error };
      },
    };
  };
})();
"""
