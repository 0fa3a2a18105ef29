"""api/nodeclass_hints: an AMI alias whose version is neither latest nor a release of its family is a warning (no
AMI would match it); latest and real release formats are not."""

from __future__ import annotations

from karpenter_lambda.api.nodeclass_hints import nodeclass_hints


def _doc(*aliases):
    return {"kind": "EC2NodeClass", "spec": {"amiSelectorTerms": [{"alias": a} for a in aliases]}}


def test_a_version_no_release_has_is_a_warning():
    found = [(e.path, e.message) for e in nodeclass_hints(_doc("al2023@latst", "al2@2024-08-07", "bottlerocket@Latest"))]
    assert found == [
        ("spec.amiSelectorTerms[0].alias", "version 'latst' of alias al2023@latst is neither latest nor a release of "
                                           "al2023 (such as v20240807): no AMI will match it, so the class never "
                                           "becomes ready (did you mean latest?)"),
        ("spec.amiSelectorTerms[1].alias", "version '2024-08-07' of alias al2@2024-08-07 is neither latest nor a "
                                           "release of al2 (such as v20240807): no AMI will match it, so the class "
                                           "never becomes ready"),
        ("spec.amiSelectorTerms[2].alias", "version 'Latest' of alias bottlerocket@Latest is neither latest nor a "
                                           "release of bottlerocket (such as v1.20.3): no AMI will match it, so the "
                                           "class never becomes ready (did you mean latest?)"),
    ]


def test_latest_and_releases_are_not_warned():
    assert nodeclass_hints(_doc("al2023@latest", "al2023@v20240625", "al2@v20240807", "bottlerocket@v1.20.3",
                                "bottlerocket@1.20.3", "windows2022@latest")) == []
    assert nodeclass_hints({"spec": {"amiSelectorTerms": [{"id": "ami-1"}, "x", {"alias": "nofamily"}]}}) == []
    assert nodeclass_hints(None) == [] and nodeclass_hints({"spec": []}) == []
