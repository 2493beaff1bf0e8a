"""What pages and operators read, kept off the claim path: admin listings, the seat map and
availability per section."""
