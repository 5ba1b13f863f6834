"""The cross-component contracts: values that two or more rooms must agree on, written once.

The lowest room: standard library only, imports nothing of the project and no Pulumi, so every side that must agree
(infra/, k8s/, observability/, model_repo/, policy/, sandbox/, bench/) can import it.
"""
