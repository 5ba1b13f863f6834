"""Local stand-ins for the production pieces: a real tritonserver on 127.0.0.1."""
