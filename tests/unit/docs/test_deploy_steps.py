"""docs/deploy-steps.md, the ordered deploy page (issue 48): its commands in order obey the login rule, and every flag
of every gcloud and kubectl command is one that command's reference page lists (tests/data/cli_flags.json, recorded
from Google's and Kubernetes' reference pages with their addresses: there is no gcloud here to ask for --help).

The login rule: a command that talks to Google Cloud as gcloud's user (every gcloud command but installing
components and the logins themselves, and kubectl through gcloud's auth plugin) comes after `gcloud auth login`; a
command that runs the Pulumi engine or reads a stack (pulumi preview, up, destroy, stack, config, and the smoke test
that reads the stack's key) after `gcloud auth application-default login` and `pulumi login`. Both mutants the issue
names are tests here: a misspelled flag, and the gcloud login moved after billing.
"""

from __future__ import annotations

import json
import shlex

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.unit.docs.test_readme import readme_examples, without_comment

PAGE = PROJECT_DIR / "docs" / "deploy-steps.md"
FLAGS = PROJECT_DIR / "tests" / "data" / "cli_flags.json"
GCLOUD_LOGIN = ("gcloud", "auth", "login")
ADC_LOGIN = ("gcloud", "auth", "application-default", "login")
PULUMI_LOGIN = ("pulumi", "login")
# Commands that need no login: installing tools, the logins, local work.
NO_LOGIN = {("gcloud", "components"), GCLOUD_LOGIN, ADC_LOGIN, PULUMI_LOGIN}
PULUMI_NEEDS_BACKEND = {"preview", "up", "destroy", "stack", "config", "refresh"}


def page_commands(text: str) -> list[list[str]]:
    """Every shell command of the page's ```sh blocks, in order, as words (`export X="$(cmd)"` gives cmd too)."""
    commands = []
    for example in readme_examples(text, "docs/deploy-steps.md"):
        line = without_comment(example.command).removesuffix("&").strip()
        for part in _substitutions(line) + [line]:
            words = shlex.split(part)
            while words and ("=" in words[0] and not words[0].startswith("-") or words[0] in ("sudo", "export")):
                words = words[1:]
            if words:
                commands.append(words)
    return commands


def _substitutions(line: str) -> list[str]:
    """The commands inside $( ... ) (one level: the page nests none)."""
    found, start = [], line.find("$(")
    while start != -1:
        end = line.index(")", start)
        found.append(line[start + 2 : end])
        start = line.find("$(", end)
    return found


def needs(words: list[str]) -> set[tuple[str, ...]]:
    """The logins a command needs before it (the rule above)."""
    head = tuple(words)
    if any(head[: len(free)] == free for free in NO_LOGIN):
        return set()
    if words[0] in ("gcloud", "kubectl"):
        return {GCLOUD_LOGIN}
    if words[0] == "pulumi" and len(words) > 1 and words[1] in PULUMI_NEEDS_BACKEND:
        return {ADC_LOGIN, PULUMI_LOGIN}
    if words[0].endswith("triton-gke") and words[1:2] == ["smoke"]:
        return {ADC_LOGIN, PULUMI_LOGIN}
    return set()


def order_violations(commands: list[list[str]]) -> list[str]:
    done: set[tuple[str, ...]] = set()
    wrong = []
    for words in commands:
        missing = needs(words) - done
        if missing:
            wrong.append(f"{' '.join(words)}: before {' and '.join(' '.join(m) for m in sorted(missing))}")
        for login in (GCLOUD_LOGIN, ADC_LOGIN, PULUMI_LOGIN):
            if tuple(words[: len(login)]) == login:
                done.add(login)
    return wrong


def flag_violations(commands: list[list[str]], recorded: dict) -> list[str]:
    """Flags of gcloud/kubectl commands that the command's recorded reference page does not list."""
    wrong = []
    for words in commands:
        if words[0] not in ("gcloud", "kubectl"):
            continue
        flags = [w.split("=", 1)[0] for w in words if w.startswith("-")]
        positional = [w for w in words if not w.startswith("-")]
        if words[0] == "kubectl":  # kubectl -n NS VERB ...: the verb follows the global option's value
            positional = [w for i, w in enumerate(words) if not w.startswith("-") and words[i - 1] not in ("-n",)]
        name = next((c for c in sorted(recorded["commands"], key=len, reverse=True)
                     if positional[: len(c.split())] == c.split()), None)  # fmt: skip
        if name is None:
            wrong.append(f"{' '.join(words)}: no reference page recorded for this command")
            continue
        allowed = set(recorded["commands"][name]["flags"])
        allowed |= set(recorded["gcloud_wide" if words[0] == "gcloud" else "kubectl_global"]["flags"])
        wrong += [f"{' '.join(words)}: {flag} is not a flag of `{name}`" for flag in flags if flag not in allowed]
    return wrong


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(FLAGS.read_text(encoding="utf-8"))


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def test_the_page_is_in_the_site_and_the_readme_points_to_it() -> None:
    assert "deploy-steps.md" in (PROJECT_DIR / "mkdocs.yml").read_text(encoding="utf-8")
    assert "(docs/deploy-steps.md)" in (PROJECT_DIR / "README.md").read_text(encoding="utf-8")


def test_every_login_comes_before_the_commands_that_need_it() -> None:
    commands = page_commands(_page())
    assert order_violations(commands) == []
    shown = {tuple(words) for words in commands}
    assert {GCLOUD_LOGIN, ADC_LOGIN, PULUMI_LOGIN} <= shown, "both logins and the state backend's"


def test_the_page_shows_each_step_of_the_issue() -> None:
    """Tools for both install paths, billing, both quotas, init, config, up, smoke, dashboards, destroy, leftovers."""
    lines = [" ".join(w) for w in page_commands(_page())]
    for step in (
        "apt-get install google-cloud-cli google-cloud-cli-gke-gcloud-auth-plugin kubectl",
        "gcloud components install gke-gcloud-auth-plugin kubectl",
        "brew install pulumi/tap/pulumi",
        "gcloud billing projects link",
        "gcloud compute regions describe",
        "gcloud compute project-info describe",
        "pulumi stack init dev",
        "pulumi config set gcp:project",
        "pulumi up -s dev",
        ".venv/bin/triton-gke smoke",
        "kubectl -n monitoring port-forward svc/grafana",
        "pulumi destroy -s dev",
        "gcloud compute network-endpoint-groups list",
    ):
        assert any(line.startswith(step) for line in lines), step


def test_every_gcloud_and_kubectl_flag_is_on_the_commands_reference_page(recorded: dict) -> None:
    assert flag_violations(page_commands(_page()), recorded) == []
    for entry in [*recorded["commands"].values(), recorded["gcloud_wide"], recorded["kubectl_global"]]:
        assert entry["url"].startswith(("https://cloud.google.com/", "https://kubernetes.io/")), entry["url"]


def test_a_misspelled_flag_is_caught(recorded: dict) -> None:
    mutant = _page().replace("--billing-account=", "--billing-acount=", 1)
    found = flag_violations(page_commands(mutant), recorded)
    assert found == [
        "gcloud billing projects link YOUR_PROJECT --billing-acount=YOUR_BILLING_ACCOUNT: --billing-acount is not a "
        "flag of `gcloud billing projects link`"
    ], found


def test_a_login_moved_after_billing_is_caught() -> None:
    text = _page()
    login = "gcloud auth login\n"
    billing = "gcloud billing projects link YOUR_PROJECT --billing-account=YOUR_BILLING_ACCOUNT\n"
    mutant = text.replace(login, "", 1).replace(billing, billing + login, 1)
    assert mutant.index(login) > mutant.index(billing)
    found = order_violations(page_commands(mutant))
    assert found == [f"{billing.strip()}: before gcloud auth login"], found
