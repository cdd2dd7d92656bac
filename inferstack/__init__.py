"""inferstack: size an AI inference workload, then provision a secure, priced server for it with Pulumi.

spec (what you want) → sizing (pure Python) → plan (the contract) → bootstrap + components (Pulumi)
"""

__version__ = "0.1.0"
