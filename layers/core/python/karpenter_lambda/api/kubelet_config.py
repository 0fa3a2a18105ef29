"""The EC2NodeClass ``spec.kubelet`` beyond the twelve fields Karpenter interprets: Karpenter v1.15's extended
KubeletConfiguration (aws/karpenter-provider-aws ``designs/extended-kubelet-configuration.md``,
``pkg/apis/v1/kubeletconfiguration_validation.go``, ``pkg/controllers/nodeclass/validation.go``).  Pure data and rules.

* Any field of the kubelet's ``KubeletConfiguration`` (``kubelet.config.k8s.io/v1beta1``, as in ``k8s.io/kubelet``
  v0.36.3, the version Karpenter pins) may be set; its JSON type is checked (:data:`PASSTHROUGH`, schema nodes for
  :class:`~.schema.Obj`'s ``passthrough``); a name that is not a field is an unknown field.  Nested structs of the
  kubelet's own package are checked field by field; ``logging`` and ``tracing`` (component-base types) only as
  mappings.  ``evictionMinimumReclaim`` takes eviction signals, each a percentage or a quantity.
* ``registerWithTaints`` is refused: the NodeClaim's taints and startupTaints are what a node registers with.
* Only AL2023 (nodeadm's ``NodeConfig``, ``spec.kubelet.config``) passes these fields to the kubelet
  (``adapters/aws/userdata.node_config``).  On AL2, Bottlerocket and Windows they would be dropped, so
  :func:`family_problems` refuses them there, with ``podsPerCore`` on Bottlerocket and more than one ``clusterDNS``
  entry (one-valued bootstrap parameters) -- Karpenter's ``UnsupportedKubeletConfiguration``.  Custom is exempt: its
  userData is the user's own.

Karpenter reports these on the EC2NodeClass's ``ValidationSucceeded`` condition after the apply; ``validate`` and
the install report them before it, as every other field error.  CEL expressions in ``maxPods``, ``kubeReserved`` and
``systemReserved`` (Karpenter's ``NodeClassCEL`` alpha feature gate, off by default) are not supported:
:data:`EXPRESSIONS_NOT_SUPPORTED`.
"""

from __future__ import annotations

from .quantity import QuantityError, parse_quantity
from .schema import NOT_SUPPORTED, AnyValue, Bool, Int, List, Map, Node, Obj, OneOf, Refused, Str, describe

__all__ = ["KUBELET_VERSION", "MAPPED", "PASSTHROUGH", "EXPRESSIONS_NOT_SUPPORTED", "family_problems",
           "passthrough_fields"]

#: where the field list comes from (what "unknown field" is measured against)
KUBELET_VERSION = "kubelet.config.k8s.io/v1beta1 of k8s.io/kubelet v0.36.3"

#: the fields Karpenter interprets (scheduling, and the bootstrap of every AMI family): validation.py's KUBELET
MAPPED = ("clusterDNS", "maxPods", "podsPerCore", "systemReserved", "kubeReserved", "evictionHard", "evictionSoft",
          "evictionSoftGracePeriod", "evictionMaxPodGracePeriod", "imageGCHighThresholdPercent",
          "imageGCLowThresholdPercent", "cpuCFSQuota")

EXPRESSIONS_NOT_SUPPORTED = (f"{NOT_SUPPORTED} (CEL expressions in spec.kubelet, Karpenter's NodeClassCEL alpha "
                             "feature gate, off by default: give a literal value)")

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_SIGNALS = ("memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree",
            "pid.available")


def _s() -> Node:
    return Str()


def _b() -> Node:
    return Bool()


def _i32() -> Node:
    return Int(minimum=_INT32[0], maximum=_INT32[1])


def _i64() -> Node:
    return Int(minimum=_INT64[0], maximum=_INT64[1])


def _duration() -> Node:
    # metav1.Duration: a Go duration string (the kubelet parses it; only its type is checked here, as Karpenter does)
    return Str()


def _float(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, got {describe(value)}"
    return None


def _threshold(value) -> str | None:
    # evictionMinimumReclaim: a percentage or a non-negative quantity (Karpenter's validateEvictionThreshold)
    if not isinstance(value, str):
        return f"must be a string (a percentage such as 5% or a quantity such as 500Mi), got {describe(value)}"
    if value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            return f"{value!r} must be a percentage or a resource quantity"
        return None if 0 <= pct <= 100 else f"{value!r} must be a percentage between 0% and 100%"
    try:
        q = parse_quantity(value)
    except QuantityError:
        return f"{value!r} must be a percentage or a resource quantity"
    return f"{value!r} can't be a negative resource quantity" if q < 0 else None


def _signal_key(k: str) -> str | None:
    return None if k in _SIGNALS else f"{k!r} isn't a valid eviction signal, must be one of {', '.join(_SIGNALS)}"


def _quantity(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return f"must be a quantity, got {describe(value)}"
    try:
        parse_quantity(value)
    except QuantityError as e:
        return str(e)
    return None


def _build() -> dict[str, Node]:
    s, b, i32, i64, d = _s, _b, _i32, _i64, _duration
    authentication = Obj({
        "x509": Obj({"clientCAFile": s()}),
        "webhook": Obj({"enabled": b(), "cacheTTL": d()}),
        "anonymous": Obj({"enabled": b()}),
    })
    authorization = Obj({"mode": s(), "webhook": Obj({"cacheAuthorizedTTL": d(), "cacheUnauthorizedTTL": d()})})
    fields: dict[str, Node] = {
        "enableServer": b(), "staticPodPath": s(), "podLogsDir": s(), "syncFrequency": d(),
        "fileCheckFrequency": d(), "httpCheckFrequency": d(), "staticPodURL": s(),
        "staticPodURLHeader": Map(List(s())), "address": s(), "port": i32(), "readOnlyPort": i32(),
        "tlsCertFile": s(), "tlsPrivateKeyFile": s(), "tlsCipherSuites": List(s()), "tlsCurvePreferences": List(i32()),
        "tlsMinVersion": s(), "rotateCertificates": b(), "serverTLSBootstrap": b(),
        "authentication": authentication, "authorization": authorization,
        "registryPullQPS": i32(), "registryBurst": i32(), "imagePullCredentialsVerificationPolicy": s(),
        "preloadedImagesVerificationAllowlist": List(s()), "eventRecordQPS": i32(), "eventBurst": i32(),
        "enableDebuggingHandlers": b(), "enableContentionProfiling": b(), "healthzPort": i32(),
        "healthzBindAddress": s(), "oomScoreAdj": i32(), "clusterDomain": s(),
        "streamingConnectionIdleTimeout": d(), "nodeStatusUpdateFrequency": d(), "nodeStatusReportFrequency": d(),
        "nodeLeaseDurationSeconds": i32(), "imageMinimumGCAge": d(), "imageMaximumGCAge": d(),
        "volumeStatsAggPeriod": d(), "kubeletCgroups": s(), "systemCgroups": s(), "cgroupRoot": s(),
        "cgroupsPerQOS": b(), "cgroupDriver": s(), "cpuManagerPolicy": s(), "singleProcessOOMKill": b(),
        "cpuManagerPolicyOptions": Map(s()), "cpuManagerReconcilePeriod": d(), "memoryManagerPolicy": s(),
        "topologyManagerPolicy": s(), "topologyManagerScope": s(), "topologyManagerPolicyOptions": Map(s()),
        "qosReserved": Map(s()), "runtimeRequestTimeout": d(), "hairpinMode": s(), "podCIDR": s(),
        "podPidsLimit": i64(), "resolvConf": s(), "runOnce": b(), "cpuCFSQuotaPeriod": d(),
        "nodeStatusMaxImages": i32(), "maxOpenFiles": i64(), "contentType": s(), "kubeAPIQPS": i32(),
        "kubeAPIBurst": i32(), "serializeImagePulls": b(), "maxParallelImagePulls": i32(),
        "evictionPressureTransitionPeriod": d(),
        "evictionMinimumReclaim": Map(OneOf(_threshold), key_check=_signal_key),
        "mergeDefaultEvictionSettings": b(), "enableControllerAttachDetach": b(), "protectKernelDefaults": b(),
        "makeIPTablesUtilChains": b(), "iptablesMasqueradeBit": i32(), "iptablesDropBit": i32(),
        "featureGates": Map(b()), "failSwapOn": b(), "memorySwap": Obj({"swapBehavior": s()}),
        "containerLogMaxSize": s(), "containerLogMaxFiles": i32(), "containerLogMaxWorkers": i32(),
        "containerLogMonitorInterval": d(), "configMapAndSecretChangeDetectionStrategy": s(),
        "reservedSystemCPUs": s(), "showHiddenMetricsForVersion": s(), "systemReservedCgroup": s(),
        "kubeReservedCgroup": s(), "enforceNodeAllocatable": List(s()), "allowedUnsafeSysctls": List(s()),
        "volumePluginDir": s(), "providerID": s(), "kernelMemcgNotification": b(),
        "logging": Map(AnyValue()), "enableSystemLogHandler": b(), "enableSystemLogQuery": b(),
        "shutdownGracePeriod": d(), "shutdownGracePeriodCriticalPods": d(),
        "shutdownGracePeriodByPodPriority": List(Obj({"priority": i32(), "shutdownGracePeriodSeconds": i64()})),
        "crashLoopBackOff": Obj({"maxContainerRestartPeriod": d()}),
        "reservedMemory": List(Obj({"numaNode": i32(), "limits": Map(OneOf(_quantity))})),
        "enableProfilingHandler": b(), "enableDebugFlagsHandler": b(), "seccompDefault": b(),
        "memoryThrottlingFactor": OneOf(_float), "memoryReservationPolicy": s(),
        "registerWithTaints": Refused("a node registers with its NodeClaim's taints and startupTaints, set by "
                                      "karpenter-lambda as Karpenter sets them"),
        "registerNode": b(), "tracing": Map(AnyValue()), "localStorageCapacityIsolation": b(),
        "containerRuntimeEndpoint": s(), "imageServiceEndpoint": s(), "failCgroupV1": b(),
        "userNamespaces": Obj({"idsPerPod": i64()}),
    }
    return fields


#: the KubeletConfiguration fields beyond :data:`MAPPED`, each a schema node of its JSON type
PASSTHROUGH: dict[str, Node] = _build()


def passthrough_fields(kubelet: dict | None) -> dict:
    """The entries of ``spec.kubelet`` that only the kubelet reads (AL2023's NodeConfig carries them through)."""
    return {k: v for k, v in (kubelet or {}).items() if k not in MAPPED}


def family_problems(family: str | None, kubelet: dict | None) -> list[tuple[str, str]]:
    """(field, message) for what ``family`` would drop of ``kubelet`` (Karpenter's UnsupportedKubeletConfiguration):
    fields beyond :data:`MAPPED` outside AL2023, ``podsPerCore`` on Bottlerocket, more than one ``clusterDNS``
    entry outside AL2023.  Custom (and an unknown family) is exempt."""
    if not kubelet or family in (None, "AL2023", "Custom"):
        return []
    out = []
    for k in kubelet:
        if k not in MAPPED and k in PASSTHROUGH and k != "registerWithTaints":
            out.append((k, f"not applied by the {family} AMI family, which passes only {', '.join(MAPPED)} to "
                           "the kubelet (AL2023's NodeConfig takes every KubeletConfiguration field): it would be "
                           "silently dropped"))
    if family == "Bottlerocket" and kubelet.get("podsPerCore") is not None:
        out.append(("podsPerCore", "not applied by the Bottlerocket AMI family (it has no setting for it): it would "
                                   "be silently dropped"))
    dns = kubelet.get("clusterDNS")
    if isinstance(dns, list) and len(dns) > 1:
        out.append(("clusterDNS", f"the {family} AMI family takes one entry (a single-valued bootstrap parameter), "
                                  f"but {len(dns)} were set"))
    return out
