"""Monitoring of the inference service: prometheus.yml, recording/alerting rules, Grafana dashboards.

What a Kubernetes component deploys (all plain text, no Pulumi here):
    prometheus_config_yaml(region, stack)   prometheus.yml
    rules_yaml(SloSettings(), region)       the rules file its rule_files point at
    dashboards()                            file name -> Grafana dashboard JSON (also in dashboards/)
"""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `observability` (the checkout's link), this is triton_gke.observability itself
