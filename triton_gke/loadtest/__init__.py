"""Load tests: the Locust file deployed with Locust and run locally by the tests."""
