"""The resend path: a client's repeated history matched against the previous request, and forwarded early."""
