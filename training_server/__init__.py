"""Training server: durable samples, periodic retraining, bundle publication."""
