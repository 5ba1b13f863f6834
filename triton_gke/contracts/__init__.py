"""The cross-component contracts: values that two or more rooms must agree on, written once.

The lowest room: standard library only, imports nothing of the project and no Pulumi, so every side that must agree
(infra/, k8s/, observability/, model_repo/, policy/, sandbox/, bench/) can import it.
"""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `contracts` (the checkout's link), this is triton_gke.contracts itself
