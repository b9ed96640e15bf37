"""Mail routing: each message delivered exactly once (rules.py pure, router.py its
effects) and the trust layer's search for injected instructions (trust.py)."""
