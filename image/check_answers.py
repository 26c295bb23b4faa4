#!/usr/bin/env python3
"""The checks of image/smoke.sh that read JSON or metrics: each subcommand
exits 0 when what it reads is right, 1 with the reason otherwise.

  check_answers.py config INSPECT.json COMMIT
      the image's configuration (OCIv1.config in `buildah inspect`): the
      user, the entrypoint, the ports and the revision label
  check_answers.py allowed REQUEST.json ANSWER.json
  check_answers.py denied REQUEST.json ANSWER.json
  check_answers.py mutate REQUEST.json ANSWER.json
      an AdmissionReview answer to the request: allowed; denied with a
      reason; allowed with a JSON Patch that, applied to the request's
      object, writes the default drain timeout
  check_answers.py metrics METRICS.txt
      /metrics counted the three requests above
"""

import base64
import copy
import json
import re
import sys


class Failed(Exception):
    """A check that did not hold; its message says what was wrong."""


def expect(condition, message):
    if not condition:
        raise Failed(message)


def load(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def check_config(inspect_path, commit):
    config = load(inspect_path)["OCIv1"]["config"]
    expect(config.get("User") == "65532:65532", f"User is {config.get('User')!r}, not 65532:65532")
    expect(
        config.get("Entrypoint") == ["/usr/local/bin/pipelinerollout-webhook"],
        f"Entrypoint is {config.get('Entrypoint')!r}",
    )
    expect(config.get("Cmd") == ["serve"], f"Cmd is {config.get('Cmd')!r}")
    ports = sorted((config.get("ExposedPorts") or {}).keys())
    expect(ports == ["8080/tcp", "8443/tcp"], f"ExposedPorts are {ports}")
    revision = (config.get("Labels") or {}).get("org.opencontainers.image.revision")
    expect(revision == commit, f"the revision label is {revision!r}, not {commit}")
    return f"user 65532:65532, entrypoint, ports 8443 and 8080, revision {commit}"


def response(request_path, answer_path):
    request = load(request_path)
    answer = load(answer_path)
    expect(answer.get("kind") == "AdmissionReview", "the answer is not an AdmissionReview")
    expect(
        answer.get("apiVersion") == request.get("apiVersion"),
        f"answered as {answer.get('apiVersion')!r} to a {request.get('apiVersion')!r} request",
    )
    got = answer.get("response") or {}
    expect(
        got.get("uid") == request["request"]["uid"],
        f"the answer's uid {got.get('uid')!r} is not the request's",
    )
    return request, got


def check_allowed(request_path, answer_path):
    _, got = response(request_path, answer_path)
    expect(got.get("allowed") is True, f"not allowed: {got}")
    return "allowed"


def check_denied(request_path, answer_path):
    _, got = response(request_path, answer_path)
    expect(got.get("allowed") is False, f"not denied: {got}")
    status = got.get("status") or {}
    expect(status.get("code") == 403, f"status.code is {status.get('code')!r}, not 403")
    message = status.get("message") or ""
    expect(
        "allow-data-loss" in message and "forceReapply" in message,
        f"the denial does not say what is wrong and how to fix it: {message!r}",
    )
    return f"denied (403): {message[:80]}..."


def pointer(path):
    """The reference tokens of a JSON Pointer (RFC 6901)."""
    expect(path.startswith("/"), f"bad JSON Pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def apply_patch(document, patch):
    """Applies a JSON Patch (RFC 6902) of add, replace and remove
    operations; anything else fails the check."""
    document = copy.deepcopy(document)
    for op in patch:
        *parents, last = pointer(op["path"])
        target = document
        for token in parents:
            target = target[int(token)] if isinstance(target, list) else target[token]
        kind = op["op"]
        if kind == "add" and isinstance(target, list):
            target.insert(len(target) if last == "-" else int(last), op["value"])
        elif kind in ("add", "replace"):
            expect(isinstance(target, dict), f"{op} does not apply")
            expect(kind == "add" or last in target, f"{op} replaces nothing")
            target[last] = op["value"]
        elif kind == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise Failed(f"unexpected patch operation {op}")
    return document


def check_mutate(request_path, answer_path):
    request, got = response(request_path, answer_path)
    expect(got.get("allowed") is True, f"not allowed: {got}")
    expect(got.get("patchType") == "JSONPatch", f"patchType is {got.get('patchType')!r}")
    patch = json.loads(base64.b64decode(got["patch"]))
    before = request["request"]["object"]
    expect(
        "lifecycle" not in before["spec"]["pipeline"]["spec"],
        "the fixture already has a lifecycle: it cannot show the default",
    )
    after = apply_patch(before, patch)
    lifecycle = after["spec"]["pipeline"]["spec"].get("lifecycle") or {}
    timeout = lifecycle.get("pauseGracePeriodSeconds")
    # The built-in policy's default: one year, "no timeout" (docs/policy.md).
    expect(
        timeout == 31536000,
        f"the patched object's pauseGracePeriodSeconds is {timeout!r}, not the built-in default 31536000",
    )
    return f"mutated: {len(patch)} operations, pauseGracePeriodSeconds {timeout}"


SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def check_metrics(metrics_path):
    counted = {}
    with open(metrics_path, encoding="utf-8") as file:
        text = file.read()
    expect(text.rstrip().endswith("# EOF"), "/metrics is not OpenMetrics text (no # EOF)")
    for line in text.splitlines():
        found = SAMPLE.match(line)
        if not found or found["name"] != "pipelinerollout_webhook_requests_total":
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', found["labels"]))
        key = (labels.get("webhook"), labels.get("result"))
        counted[key] = counted.get(key, 0) + float(found["value"])
    for key in [("validate", "allowed"), ("validate", "denied"), ("mutate", "allowed")]:
        expect(counted.get(key, 0) >= 1, f"pipelinerollout_webhook_requests_total has no {key}: {counted}")
    return "pipelinerollout_webhook_requests_total: " + ", ".join(
        f"{webhook} {result} {int(n)}" for (webhook, result), n in sorted(counted.items())
    )


CHECKS = {
    "config": check_config,
    "allowed": check_allowed,
    "denied": check_denied,
    "mutate": check_mutate,
    "metrics": check_metrics,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in CHECKS:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        print(f"ok: {CHECKS[argv[1]](*argv[2:])}")
    except Failed as error:
        print(f"FAIL ({argv[1]}): {error}", file=sys.stderr)
        return 1
    except (OSError, KeyError, ValueError, TypeError, IndexError) as error:
        print(f"FAIL ({argv[1]}): not what was expected: {error!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
