"""Monitoring of the inference service: prometheus.yml, recording/alerting rules, Grafana dashboards.

What a Kubernetes component deploys (all plain text, no Pulumi here):
    prometheus_config_yaml(region, stack)   prometheus.yml
    rules_yaml(SloSettings(), region)       the rules file its rule_files point at
    dashboards()                            file name -> Grafana dashboard JSON (also in dashboards/)
"""
