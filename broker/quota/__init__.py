"""Client quotas (Kafka's ClientQuotaManager): produce and fetch byte rates measured per
(user, client id) in sampled windows, and the throttle time a client over its quota is
given (``throttle_time_ms``, its connection muted meanwhile, KIP-219)."""
