"""The job frameworks CRL2 knows: how each declares a job kind and reads its hard timeout."""
