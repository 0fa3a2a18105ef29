"""Table-driven: each invalid manifest (a valid base + a small YAML patch) must report the exact
field path and a message naming the problem.  Covers every rule family of issue 2 item 2."""

from __future__ import annotations

import pytest

from karpenter_lambda.api.manifests import load_text

from .helpers import manifest_text

NP_REQ = "spec.template.spec.requirements"
TS = "spec.template.spec"


def reqs(*lines: str) -> str:
    """A patch replacing the NodePool requirements with the given flow-style items."""
    body = "\n".join(f"        - {line}" for line in lines)
    return f"spec:\n  template:\n    spec:\n      requirements:\n{body}\n"


def tmpl_spec(yaml_body: str) -> str:
    indented = "\n".join("      " + line for line in yaml_body.strip("\n").splitlines())
    return f"spec:\n  template:\n    spec:\n{indented}\n"


def disruption(yaml_body: str) -> str:
    indented = "\n".join("    " + line for line in yaml_body.strip("\n").splitlines())
    return f"spec:\n  disruption:\n{indented}\n"


def budget(yaml_body: str) -> str:
    return disruption("consolidateAfter: 0s\nbudgets:\n" + "\n".join("  " + line for line in yaml_body.strip("\n").splitlines()))


def nc_spec(yaml_body: str) -> str:
    indented = "\n".join("  " + line for line in yaml_body.strip("\n").splitlines())
    return f"spec:\n{indented}\n"


def kubelet(yaml_body: str) -> str:
    return nc_spec("kubelet:\n" + "\n".join("  " + line for line in yaml_body.strip("\n").splitlines()))


LONG_KEY = "example.com/" + "a" * 63 + "." + "b" * 250
CASES = [
    # --- requirements: operators and values
    ("req-bad-operator", "NodePool", reqs("{key: kubernetes.io/arch, operator: Equals, values: [amd64]}"), f"{NP_REQ}[0].operator", "unsupported value 'Equals'"),
    ("req-in-no-values", "NodePool", reqs("{key: kubernetes.io/arch, operator: In}"), f"{NP_REQ}[0].values", "operator In requires at least one value"),
    ("req-in-empty-values", "NodePool", reqs("{key: kubernetes.io/arch, operator: In, values: []}"), f"{NP_REQ}[0].values", "at least one value"),
    ("req-gt-two-values", "NodePool", reqs("{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ['2', '4']}"), f"{NP_REQ}[0].values", "operator Gt requires exactly one value"),
    ("req-gt-not-integer", "NodePool", reqs("{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [two]}"), f"{NP_REQ}[0].values[0]", "non-negative integer, got 'two'"),
    ("req-lt-negative", "NodePool", reqs("{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ['-1']}"), f"{NP_REQ}[0].values[0]", "non-negative integer"),
    ("req-gte-no-value", "NodePool", reqs("{key: karpenter.k8s.aws/instance-memory, operator: Gte}"), f"{NP_REQ}[0].values", "operator Gte requires exactly one value"),
    ("req-lte-decimal", "NodePool", reqs("{key: karpenter.k8s.aws/instance-memory, operator: Lte, values: ['1.5']}"), f"{NP_REQ}[0].values[0]", "operator Lte requires a non-negative integer"),
    ("req-values-int-type", "NodePool", reqs("{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [2]}"), f"{NP_REQ}[0].values[0]", "must be a string, got integer 2"),
    ("req-exists-with-values", "NodePool", reqs("{key: karpenter.k8s.aws/instance-family, operator: Exists, values: [m5]}"), f"{NP_REQ}[0].values", "must be empty for operator Exists"),
    ("req-minvalues-exceeds", "NodePool", reqs("{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m], minValues: 3}"), f"{NP_REQ}[0].minValues", "minValues 3 exceeds the 2 values given for operator In"),
    ("req-minvalues-too-big", "NodePool", reqs("{key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 51}"), f"{NP_REQ}[0].minValues", "51 is out of range: must be between 1 and 50"),
    ("req-minvalues-zero", "NodePool", reqs("{key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 0}"), f"{NP_REQ}[0].minValues", "between 1 and 50"),
    ("req-missing-operator", "NodePool", reqs("{key: kubernetes.io/arch, values: [amd64]}"), f"{NP_REQ}[0].operator", "Required value"),
    ("req-value-too-long", "NodePool", reqs("{key: example.com/team, operator: In, values: [" + "x" * 64 + "]}"), f"{NP_REQ}[0].values[0]", "at most 63 characters"),
    ("req-value-bad-syntax", "NodePool", reqs("{key: example.com/team, operator: In, values: ['-bad-']}"), f"{NP_REQ}[0].values[0]", "invalid label value '-bad-'"),
    ("req-capacity-type-unknown", "NodePool", reqs("{key: karpenter.sh/capacity-type, operator: In, values: [cheap]}"), f"{NP_REQ}[0].values", "must include at least one of on-demand, spot, reserved"),
    ("req-tenancy-unknown", "NodePool", reqs("{key: karpenter.k8s.aws/instance-tenancy, operator: In, values: [host]}"), f"{NP_REQ}[0].values[0]", "unsupported instance tenancy 'host'"),
    ("req-tenancy-dedicated", "NodePool", reqs("{key: karpenter.k8s.aws/instance-tenancy, operator: In, values: [dedicated]}"), f"{NP_REQ}[0].values", "not supported by karpenter-lambda (dedicated tenancy"),
    ("req-tenancy-not-default", "NodePool", reqs("{key: karpenter.k8s.aws/instance-tenancy, operator: NotIn, values: [default]}"), f"{NP_REQ}[0].values", "launches default-tenancy instances only"),
    ("req-too-many", "NodePool", reqs(*[f"{{key: example.com/k{i}, operator: Exists}}" for i in range(101)]), NP_REQ, "must have at most 100 items, got 101"),
    ("req-missing", "NodePool", tmpl_spec("requirements: __delete__"), f"{NP_REQ}", "Required value"),
    # --- requirements: label domains and key syntax
    ("req-key-nodepool", "NodePool", reqs("{key: karpenter.sh/nodepool, operator: In, values: [x]}"), f"{NP_REQ}[0].key", 'label "karpenter.sh/nodepool" is restricted'),
    ("req-key-karpenter-sh", "NodePool", reqs("{key: karpenter.sh/custom, operator: Exists}"), f"{NP_REQ}[0].key", 'label domain "karpenter.sh" is restricted'),
    ("req-key-hostname", "NodePool", reqs("{key: kubernetes.io/hostname, operator: Exists}"), f"{NP_REQ}[0].key", 'label "kubernetes.io/hostname" is restricted'),
    ("req-key-aws-unknown", "NodePool", reqs("{key: karpenter.k8s.aws/instance-colour, operator: Exists}"), f"{NP_REQ}[0].key", 'label domain "karpenter.k8s.aws" is restricted'),
    ("req-key-aws-nitro-prefix", "NodePool", reqs("{key: karpenter.k8s.aws/nitro-sandbox-enabled, operator: Exists}"), f"{NP_REQ}[0].key", 'label domain "karpenter.k8s.aws" is restricted'),
    ("req-gt-beyond-int64", "NodePool", reqs("{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ['9223372036854775808']}"), f"{NP_REQ}[0].values[0]", "at most 9223372036854775807"),
    ("req-key-syntax", "NodePool", reqs("{key: 'bad key!', operator: Exists}"), f"{NP_REQ}[0].key", "invalid label key 'bad key!'"),
    ("req-key-upper-prefix", "NodePool", reqs("{key: Example.com/team, operator: Exists}"), f"{NP_REQ}[0].key", "prefix must be a lowercase DNS subdomain"),
    ("req-key-too-long", "NodePool", reqs("{key: " + LONG_KEY + ", operator: Exists}"), f"{NP_REQ}[0].key", "at most 316 characters"),
    # --- template labels
    ("label-nodepool", "NodePool", "spec:\n  template:\n    metadata:\n      labels:\n        karpenter.sh/nodepool: x\n", "spec.template.metadata.labels[karpenter.sh/nodepool]", "restricted"),
    ("label-hostname", "NodePool", "spec:\n  template:\n    metadata:\n      labels:\n        kubernetes.io/hostname: x\n", "spec.template.metadata.labels[kubernetes.io/hostname]", "restricted"),
    ("label-bad-value", "NodePool", "spec:\n  template:\n    metadata:\n      labels:\n        team: 'a b'\n", "spec.template.metadata.labels[team]", "invalid label value 'a b'"),
    ("label-value-too-long", "NodePool", "spec:\n  template:\n    metadata:\n      labels:\n        team: " + "v" * 64 + "\n", "spec.template.metadata.labels[team]", "at most 63 characters"),
    ("label-unknown-metadata-field", "NodePool", "spec:\n  template:\n    metadata:\n      label:\n        team: a\n", "spec.template.metadata.label", 'unknown field (did you mean "labels"?)'),
    # --- taints
    ("taint-bad-effect", "NodePool", tmpl_spec("taints:\n  - {key: gpu, effect: NoScheduleX}"), f"{TS}.taints[0].effect", "unsupported value 'NoScheduleX'"),
    ("taint-missing-key", "NodePool", tmpl_spec("taints:\n  - {value: x, effect: NoSchedule}"), f"{TS}.taints[0].key", "Required value"),
    ("taint-missing-effect", "NodePool", tmpl_spec("startupTaints:\n  - {key: example.com/init}"), f"{TS}.startupTaints[0].effect", "Required value"),
    ("taint-duplicate", "NodePool", tmpl_spec("taints:\n  - {key: gpu, effect: NoSchedule}\n  - {key: gpu, value: x, effect: NoSchedule}"), f"{TS}.taints[1]", "duplicate taint key 'gpu' with effect NoSchedule"),
    ("taint-duplicate-startup", "NodePool", tmpl_spec("taints:\n  - {key: gpu, effect: NoSchedule}\nstartupTaints:\n  - {key: gpu, effect: NoSchedule}"), f"{TS}.startupTaints[0]", f"already at {TS}.taints[0]"),
    ("taint-empty-value", "NodePool", tmpl_spec("taints:\n  - {key: gpu, value: '', effect: NoSchedule}"), f"{TS}.taints[0].value", "omit 'value'"),
    ("taint-time-added", "NodePool", tmpl_spec("startupTaints:\n  - {key: gpu, effect: NoSchedule, timeAdded: yesterday}"), f"{TS}.startupTaints[0].timeAdded", "must be of type date-time"),
    ("taint-bad-key", "NodePool", tmpl_spec("taints:\n  - {key: 'a/b/c', effect: NoSchedule}"), f"{TS}.taints[0].key", "invalid taint key 'a/b/c'"),
    # --- nodeClassRef
    ("ncr-missing", "NodePool", tmpl_spec("nodeClassRef: __delete__"), f"{TS}.nodeClassRef", "Required value"),
    ("ncr-missing-group", "NodePool", tmpl_spec("nodeClassRef:\n  group: __delete__"), f"{TS}.nodeClassRef.group", "Required value"),
    ("ncr-empty-kind", "NodePool", tmpl_spec("nodeClassRef:\n  kind: ''"), f"{TS}.nodeClassRef.kind", "must not be empty"),
    ("ncr-group-slash", "NodePool", tmpl_spec("nodeClassRef:\n  group: a/b/c"), f"{TS}.nodeClassRef.group", "must be an API group"),
    # --- durations
    ("expire-after-days", "NodePool", tmpl_spec("expireAfter: 30d"), f"{TS}.expireAfter", "invalid value '30d': must be a duration"),
    ("expire-after-int", "NodePool", tmpl_spec("expireAfter: 720"), f"{TS}.expireAfter", "must be a string, got integer 720"),
    # the hint: quoting alone would not do for a duration (it needs its unit), so say what a valid value is
    ("expire-after-int-hint", "NodePool", tmpl_spec("expireAfter: 720"), f"{TS}.expireAfter",
     "got integer 720 (must be a duration such as 30s, 10m, 720h"),
    ("tgp-never", "NodePool", tmpl_spec("terminationGracePeriod: Never"), f"{TS}.terminationGracePeriod", "Never is not allowed here"),
    ("consolidate-after-words", "NodePool", disruption("consolidateAfter: 5 minutes"), "spec.disruption.consolidateAfter", "invalid value '5 minutes'"),
    ("consolidate-after-missing", "NodePool", disruption("consolidationPolicy: WhenEmpty"), "spec.disruption.consolidateAfter", "Required value"),
    # --- consolidation policy and unknown fields
    ("policy-old-value", "NodePool", disruption("consolidateAfter: 0s\nconsolidationPolicy: WhenUnderutilized"), "spec.disruption.consolidationPolicy", "must be one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced"),
    ("policy-misspelled-field", "NodePool", disruption("consolidateAfter: 0s\nconsolidationPolicyy: WhenEmpty"), "spec.disruption.consolidationPolicyy", 'unknown field (did you mean "consolidationPolicy"?)'),
    ("unknown-spec-field", "NodePool", "spec:\n  provider: {}\n", "spec.provider", "unknown field"),
    ("unknown-top-field", "NodePool", "specs: {}\n", "specs", "unknown field"),
    # --- budgets
    ("budget-nodes-pct", "NodePool", budget("- nodes: 110%"), "spec.disruption.budgets[0].nodes", "percentage 0%-100%"),
    ("budget-nodes-int", "NodePool", budget("- nodes: 5"), "spec.disruption.budgets[0].nodes", "must be a string, got integer 5"),
    ("budget-schedule-alone", "NodePool", budget("- {nodes: '0', schedule: '@daily'}"), "spec.disruption.budgets[0].duration", "'schedule' must be set with 'duration'"),
    ("budget-duration-alone", "NodePool", budget("- {nodes: '0', duration: 1h}"), "spec.disruption.budgets[0].schedule", "'schedule' must be set with 'duration'"),
    ("budget-cron-six-fields", "NodePool", budget("- {nodes: '0', schedule: '0 0 9 * * *', duration: 1h}"), "spec.disruption.budgets[0].schedule", "expected 5 fields"),
    ("budget-cron-minute-range", "NodePool", budget("- {nodes: '0', schedule: '61 * * * *', duration: 1h}"), "spec.disruption.budgets[0].schedule", "minute field: 61 is out of range 0-59"),
    ("budget-cron-bad-name", "NodePool", budget("- {nodes: '0', schedule: '0 9 * * funday', duration: 1h}"), "spec.disruption.budgets[0].schedule", "day-of-week field: 'funday' is not a number or a name"),
    ("budget-cron-every", "NodePool", budget("- {nodes: '0', schedule: '@every 5m', duration: 1h}"), "spec.disruption.budgets[0].schedule", "unknown descriptor"),
    ("budget-cron-tz", "NodePool", budget("- {nodes: '0', schedule: 'CRON_TZ=Mars/Base 0 9 * * *', duration: 1h}"), "spec.disruption.budgets[0].schedule", 'unknown time zone "Mars/Base"'),
    ("budget-cron-step-zero", "NodePool", budget("- {nodes: '0', schedule: '*/0 * * * *', duration: 1h}"), "spec.disruption.budgets[0].schedule", "step '0' must be a positive integer"),
    ("budget-duration-seconds", "NodePool", budget("- {nodes: '0', schedule: '@daily', duration: 30s}"), "spec.disruption.budgets[0].duration", "hours and/or minutes"),
    ("budget-duplicate-reason", "NodePool", budget("- {nodes: '1', reasons: [Empty, Empty]}"), "spec.disruption.budgets[0].reasons[1]", 'Duplicate value: "Empty"'),
    ("budget-bad-reason", "NodePool", budget("- {nodes: '1', reasons: [Expired]}"), "spec.disruption.budgets[0].reasons[0]", "unsupported value 'Expired'"),
    ("budget-too-many", "NodePool", budget("\n".join("- {nodes: '1'}" for _ in range(51))), "spec.disruption.budgets", "at most 50 items"),
    # --- limits, weight, replicas, metadata
    ("limits-bad-quantity", "NodePool", "spec:\n  limits:\n    cpu: lots\n", "spec.limits[cpu]", "invalid quantity 'lots'"),
    ("limits-bad-suffix", "NodePool", "spec:\n  limits:\n    memory: 10GB\n", "spec.limits[memory]", "invalid quantity '10GB'"),
    ("weight-zero", "NodePool", "spec:\n  weight: 0\n", "spec.weight", "0 is out of range: must be between 1 and 100"),
    ("weight-too-big", "NodePool", "spec:\n  weight: 101\n", "spec.weight", "between 1 and 100"),
    ("weight-string", "NodePool", "spec:\n  weight: '10'\n", "spec.weight", "must be an integer, got string '10'"),
    ("replicas-with-weight", "NodePool", "spec:\n  replicas: 3\n  weight: 5\n", "spec.weight", "not supported on static NodePools"),
    ("replicas-with-cpu-limit", "NodePool", "spec:\n  replicas: 3\n  limits:\n    cpu: '10'\n", "spec.limits", "only 'limits.nodes' is supported"),
    ("name-missing", "NodePool", "metadata:\n  name: __delete__\n", "metadata.name", "Required value"),
    ("name-not-dns", "NodePool", "metadata:\n  name: My_Pool\n", "metadata.name", "DNS-1123 subdomain"),
    ("metadata-label-key", "NodePool", "metadata:\n  labels:\n    'a/b/c': x\n", "metadata.labels[a/b/c]", "at most one '/'"),
    ("annotation-not-string", "NodePool", "metadata:\n  annotations:\n    karpenter.sh/do-not-disrupt: true\n", "metadata.annotations[karpenter.sh/do-not-disrupt]", "must be a string, got boolean true"),
    # --- EC2NodeClass: role / instanceProfile
    ("nc-role-and-profile", "EC2NodeClass", nc_spec("instanceProfile: KarpenterNodeInstanceProfile"), "spec.instanceProfile", "exactly one of ['role', 'instanceProfile']"),
    ("nc-no-role", "EC2NodeClass", nc_spec("role: __delete__"), "spec.role", "exactly one of ['role', 'instanceProfile']"),
    ("nc-empty-role", "EC2NodeClass", nc_spec("role: ''"), "spec.role", "must not be empty"),
    ("nc-ip-prefix-int32", "EC2NodeClass", nc_spec("ipPrefixCount: 2147483648"), "spec.ipPrefixCount", "between 0 and 2147483647"),
    # --- EC2NodeClass: AMI selection and family
    ("nc-ami-terms-empty", "EC2NodeClass", nc_spec("amiSelectorTerms: []"), "spec.amiSelectorTerms", "must have at least 1 item"),
    ("nc-ami-terms-missing", "EC2NodeClass", nc_spec("amiSelectorTerms: __delete__"), "spec.amiSelectorTerms", "Required value"),
    ("nc-ami-term-empty", "EC2NodeClass", nc_spec("amiFamily: AL2023\namiSelectorTerms:\n  - {}"), "spec.amiSelectorTerms[0]", "expected at least one of tags, id, name, alias, ssmParameter"),
    ("nc-ami-id-with-name", "EC2NodeClass", nc_spec("amiFamily: AL2023\namiSelectorTerms:\n  - {id: ami-123, name: my-ami}"), "spec.amiSelectorTerms[0].id", "'id' is mutually exclusive"),
    ("nc-ami-bad-id", "EC2NodeClass", nc_spec("amiFamily: AL2023\namiSelectorTerms:\n  - {id: image-123}"), "spec.amiSelectorTerms[0].id", "must look like ami-"),
    ("nc-alias-with-owner", "EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: al2023@latest, owner: amazon}"), "spec.amiSelectorTerms[0].alias", "'alias' is mutually exclusive"),
    ("nc-alias-not-alone", "EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: al2023@latest}\n  - {id: ami-123}"), "spec.amiSelectorTerms[0].alias", "an alias term must be the only term"),
    ("nc-alias-format", "EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: al2023}"), "spec.amiSelectorTerms[0].alias", "must match the format 'family@version'"),
    ("nc-alias-family", "EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: ubuntu@latest}"), "spec.amiSelectorTerms[0].alias", "alias family 'ubuntu' is not supported"),
    ("nc-alias-windows-pinned", "EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: windows2022@v20240101}"), "spec.amiSelectorTerms[0].alias", "windows families may only specify version 'latest'"),
    ("nc-alias-too-long", "EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: al2023@v20240625-very-long-version}"), "spec.amiSelectorTerms[0].alias", "at most 30 characters"),
    ("nc-family-required", "EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {id: ami-0123}"), "spec.amiFamily", "must specify amiFamily if amiSelectorTerms does not contain an alias"),
    ("nc-family-mismatch", "EC2NodeClass", nc_spec("amiFamily: AL2"), "spec.amiFamily", "must be 'AL2023' or 'Custom'"),
    ("nc-family-unknown", "EC2NodeClass", nc_spec("amiFamily: Ubuntu"), "spec.amiFamily", "unsupported value 'Ubuntu'"),
    # --- EC2NodeClass: subnet / security group / capacity reservation / placement group selectors
    ("nc-subnets-missing", "EC2NodeClass", nc_spec("subnetSelectorTerms: __delete__"), "spec.subnetSelectorTerms", "Required value"),
    ("nc-subnet-id-and-tags", "EC2NodeClass", nc_spec("subnetSelectorTerms:\n  - {id: subnet-123, tags: {a: b}}"), "spec.subnetSelectorTerms[0].id", "cannot be combined with tags"),
    ("nc-subnet-bad-id", "EC2NodeClass", nc_spec("subnetSelectorTerms:\n  - {id: sn-123}"), "spec.subnetSelectorTerms[0].id", "must look like subnet-"),
    ("nc-subnet-empty-tag", "EC2NodeClass", nc_spec("subnetSelectorTerms:\n  - tags: {Name: ''}"), "spec.subnetSelectorTerms[0].tags[Name]", "empty tag keys or values aren't supported"),
    ("nc-subnet-term-empty", "EC2NodeClass", nc_spec("subnetSelectorTerms:\n  - {}"), "spec.subnetSelectorTerms[0]", "expected at least one of tags, id"),
    ("nc-subnet-too-many-tags", "EC2NodeClass", nc_spec("subnetSelectorTerms:\n  - tags: {" + ", ".join(f"k{i}: v" for i in range(21)) + "}"), "spec.subnetSelectorTerms[0].tags", "at most 20 entries"),
    ("nc-sg-name-and-tags", "EC2NodeClass", nc_spec("securityGroupSelectorTerms:\n  - {name: my-sg, tags: {a: b}}"), "spec.securityGroupSelectorTerms[0].name", "'name' is mutually exclusive"),
    ("nc-sg-empty-list", "EC2NodeClass", nc_spec("securityGroupSelectorTerms: []"), "spec.securityGroupSelectorTerms", "at least 1 item"),
    ("nc-cr-owner", "EC2NodeClass", nc_spec("capacityReservationSelectorTerms:\n  - {ownerID: '1234', tags: {a: b}}"), "spec.capacityReservationSelectorTerms[0].ownerID", "12-digit AWS account ID"),
    ("nc-cr-id-exclusive", "EC2NodeClass", nc_spec("capacityReservationSelectorTerms:\n  - {id: cr-123, instanceMatchCriteria: open}"), "spec.capacityReservationSelectorTerms[0].id", "'id' is mutually exclusive"),
    ("nc-cr-owner-alone", "EC2NodeClass", nc_spec("capacityReservationSelectorTerms:\n  - {ownerID: '123456789012'}"), "spec.capacityReservationSelectorTerms[0]", "expected at least one of tags, id, instanceMatchCriteria"),
    ("nc-placement-both", "EC2NodeClass", nc_spec("placementGroupSelector: {name: pg, id: pg-123}"), "spec.placementGroupSelector", "exactly one of name or id"),
    # --- EC2NodeClass: tags
    ("nc-tag-cluster", "EC2NodeClass", nc_spec("tags:\n  kubernetes.io/cluster/my-cluster: owned"), "spec.tags[kubernetes.io/cluster/my-cluster]", "restricted tag matching kubernetes.io/cluster/"),
    ("nc-tag-nodepool", "EC2NodeClass", nc_spec("tags:\n  karpenter.sh/nodepool: x"), "spec.tags[karpenter.sh/nodepool]", "restricted tag matching karpenter.sh/nodepool"),
    ("nc-tag-eks", "EC2NodeClass", nc_spec("tags:\n  'eks:eks-cluster-name': x"), "spec.tags[eks:eks-cluster-name]", "restricted tag"),
    ("nc-tag-empty-key", "EC2NodeClass", nc_spec("tags:\n  '': x"), "spec.tags[]", "empty tag keys aren't supported"),
    # --- EC2NodeClass: kubelet
    ("kubelet-maxpods-negative", "EC2NodeClass", kubelet("maxPods: -1"), "spec.kubelet.maxPods", "-1 is out of range"),
    ("kubelet-gc-order", "EC2NodeClass", kubelet("imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60"), "spec.kubelet.imageGCHighThresholdPercent", "must be greater than imageGCLowThresholdPercent"),
    ("kubelet-gc-range", "EC2NodeClass", kubelet("imageGCLowThresholdPercent: 101"), "spec.kubelet.imageGCLowThresholdPercent", "between 0 and 100"),
    ("kubelet-reserved-key", "EC2NodeClass", kubelet("systemReserved:\n  nvidia.com/gpu: '1'"), "spec.kubelet.systemReserved[nvidia.com/gpu]", "valid keys for systemReserved are cpu, memory, ephemeral-storage, pid"),
    ("kubelet-reserved-negative", "EC2NodeClass", kubelet("kubeReserved:\n  cpu: -100m"), "spec.kubelet.kubeReserved[cpu]", "must not be negative"),
    ("kubelet-eviction-signal", "EC2NodeClass", kubelet("evictionHard:\n  memory.free: 100Mi"), "spec.kubelet.evictionHard[memory.free]", "valid keys for evictionHard"),
    ("kubelet-eviction-value", "EC2NodeClass", kubelet("evictionHard:\n  memory.available: lots"), "spec.kubelet.evictionHard[memory.available]", "must be a percentage (e.g. 10%) or a quantity"),
    ("kubelet-soft-no-grace", "EC2NodeClass", kubelet("evictionSoft:\n  memory.available: 5%"), "spec.kubelet.evictionSoft[memory.available]", "no matching evictionSoftGracePeriod"),
    ("kubelet-grace-duration", "EC2NodeClass", kubelet("evictionSoft:\n  memory.available: 5%\nevictionSoftGracePeriod:\n  memory.available: soon"), "spec.kubelet.evictionSoftGracePeriod[memory.available]", "invalid duration 'soon'"),
    ("kubelet-cluster-dns", "EC2NodeClass", kubelet("clusterDNS: ['10.100.0.300']"), "spec.kubelet.clusterDNS[0]", "invalid IP address"),
    ("kubelet-cfs-type", "EC2NodeClass", kubelet("cpuCFSQuota: 'yes please'"), "spec.kubelet.cpuCFSQuota", "must be true or false"),
    ("kubelet-unknown", "EC2NodeClass", kubelet("maxPodz: 10"), "spec.kubelet.maxPodz", 'unknown field (did you mean "maxPods"?)'),
    # --- EC2NodeClass: block devices
    ("bdm-two-roots", "EC2NodeClass", nc_spec("blockDeviceMappings:\n  - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 20Gi}}\n  - {deviceName: /dev/xvdb, rootVolume: true, ebs: {volumeSize: 20Gi}}"), "spec.blockDeviceMappings[1].rootVolume", "only one blockDeviceMappings with rootVolume"),
    ("bdm-no-size", "EC2NodeClass", nc_spec("blockDeviceMappings:\n  - {deviceName: /dev/xvda, ebs: {volumeType: gp3}}"), "spec.blockDeviceMappings[0].ebs", "snapshotID or volumeSize must be defined"),
    ("bdm-volume-type", "EC2NodeClass", nc_spec("blockDeviceMappings:\n  - {deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeType: gp4}}"), "spec.blockDeviceMappings[0].ebs.volumeType", "unsupported value 'gp4'"),
    ("bdm-volume-size", "EC2NodeClass", nc_spec("blockDeviceMappings:\n  - {deviceName: /dev/xvda, ebs: {volumeSize: 20GB}}"), "spec.blockDeviceMappings[0].ebs.volumeSize", "invalid volumeSize '20GB'"),
    ("bdm-volume-size-max", "EC2NodeClass", nc_spec("blockDeviceMappings:\n  - {deviceName: /dev/xvda, ebs: {volumeSize: 60000Gi}}"), "spec.blockDeviceMappings[0].ebs.volumeSize", "up to 59000Gi"),
    ("bdm-volume-size-pattern", "EC2NodeClass", nc_spec("blockDeviceMappings:\n  - {deviceName: /dev/xvda, ebs: {volumeSize: 18Ti}}"), "spec.blockDeviceMappings[0].ebs.volumeSize", "write 18432Gi"),
    ("bdm-init-rate", "EC2NodeClass", nc_spec("blockDeviceMappings:\n  - {deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeInitializationRate: 200}}"), "spec.blockDeviceMappings[0].ebs.volumeInitializationRate", "snapshotID must be set"),
    ("bdm-too-many", "EC2NodeClass", nc_spec("blockDeviceMappings:\n" + "\n".join(f"  - {{deviceName: /dev/sd{i}, ebs: {{volumeSize: 1Gi}}}}" for i in range(51))), "spec.blockDeviceMappings", "at most 50 items"),
    # --- EC2NodeClass: metadata options
    ("mdo-hop-limit", "EC2NodeClass", nc_spec("metadataOptions: {httpPutResponseHopLimit: 65}"), "spec.metadataOptions.httpPutResponseHopLimit", "65 is out of range: must be between 1 and 64"),
    ("mdo-hop-limit-zero", "EC2NodeClass", nc_spec("metadataOptions: {httpPutResponseHopLimit: 0}"), "spec.metadataOptions.httpPutResponseHopLimit", "between 1 and 64"),
    ("mdo-tokens", "EC2NodeClass", nc_spec("metadataOptions: {httpTokens: sometimes}"), "spec.metadataOptions.httpTokens", "must be one of required, optional"),
    ("mdo-unknown", "EC2NodeClass", nc_spec("metadataOptions: {httpTokenz: required}"), "spec.metadataOptions.httpTokenz", "unknown field"),
    ("nc-instance-store", "EC2NodeClass", nc_spec("instanceStorePolicy: RAID1"), "spec.instanceStorePolicy", "must be one of RAID0"),
    # --- NodeClaim
    ("claim-no-ref", "NodeClaim", "spec:\n  nodeClassRef: __delete__\n", "spec.nodeClassRef", "Required value"),
    ("claim-bad-request", "NodeClaim", "spec:\n  resources:\n    requests:\n      cpu: two\n", "spec.resources.requests[cpu]", "invalid quantity 'two'"),
    ("claim-hostname-req", "NodeClaim", "spec:\n  requirements:\n    - {key: kubernetes.io/hostname, operator: Exists}\n", "spec.requirements[0].key", "restricted"),
    ("claim-expire", "NodeClaim", "spec:\n  expireAfter: forever\n", "spec.expireAfter", "invalid value 'forever'"),
]


def test_at_least_45_cases():
    assert len(CASES) >= 45
    assert len({c[0] for c in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize("kind", ["NodePool", "EC2NodeClass", "NodeClaim"])
def test_bases_are_valid(kind):
    result = load_text(manifest_text(kind), "base.yaml")
    assert [str(i) for i in result.issues] == []
    assert len(result.objects) == 1 and result.objects[0].kind == kind


@pytest.mark.parametrize("case_id,kind,patch,path,message", CASES, ids=[c[0] for c in CASES])
def test_invalid_manifest(case_id, kind, patch, path, message):
    result = load_text(manifest_text(kind, patch), f"{case_id}.yaml")
    assert result.objects == [], "an invalid manifest must not produce an object"
    found = [(i.path, i.message) for i in result.issues]
    matching = [m for p, m in found if p == path]
    assert matching, f"no issue at {path!r}; got {found}"
    assert any(message in m for m in matching), f"no message containing {message!r} at {path!r}; got {matching}"
    for issue in result.issues:
        assert issue.kind == kind and issue.file == f"{case_id}.yaml" and issue.doc_index == 0


def test_every_error_is_reported_not_only_the_first():
    patch = """
metadata:
  name: Bad_Name
spec:
  weight: 0
  disruption:
    consolidateAfter: soon
    consolidationPolicyy: WhenEmpty
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: Equals, values: [amd64]}
        - {key: karpenter.sh/nodepool, operator: In, values: [x]}
      expireAfter: 1d
"""
    result = load_text(manifest_text("NodePool", patch), "many.yaml")
    paths = sorted(i.path for i in result.issues)
    assert paths == sorted(
        [
            "metadata.name",
            "spec.weight",
            "spec.disruption.consolidateAfter",
            "spec.disruption.consolidationPolicyy",
            f"{NP_REQ}[0].operator",
            f"{NP_REQ}[1].key",
            f"{TS}.expireAfter",
        ]
    )


def test_errors_in_several_documents_keep_their_index():
    other = manifest_text("EC2NodeClass", "spec:\n  amiFamily: Ubuntu\n").replace("name: default", "name: other")
    text = manifest_text("EC2NodeClass") + "---\n" + manifest_text("NodePool", "spec:\n  weight: 0\n") + "---\n" + other
    result = load_text(text, "multi.yaml")
    assert [(i.doc_index, i.kind, i.path) for i in result.issues] == [(1, "NodePool", "spec.weight"), (2, "EC2NodeClass", "spec.amiFamily")]
    assert len(result.objects) == 1


def test_issue_string_format():
    result = load_text(manifest_text("NodePool", "spec:\n  weight: 0\n"), "pools/np.yaml")
    assert [str(i) for i in result.issues] == ["pools/np.yaml:0: NodePool/default: spec.weight: 0 is out of range: must be between 1 and 100"]
    text = "---\n" + manifest_text("EC2NodeClass") + "---\n" + manifest_text("NodePool", reqs("{key: kubernetes.io/arch, operator: Equals, values: [amd64]}"))
    issues = load_text(text, "x.yaml").issues
    assert len(issues) == 1
    assert str(issues[0]).startswith("x.yaml:1: NodePool/default: spec.template.spec.requirements[0].operator: unsupported value 'Equals'")
