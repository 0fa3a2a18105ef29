"""api/roles.py: the deployment's node role and the EC2NodeClass role check shared by synth and `validate`."""

from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.api.roles import node_role_name, node_role_warnings, stack_name

NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: {name}}}
spec:
  {field}: {role}
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
"""


def test_node_role_name_is_fixed_until_iam_limit():
    assert node_role_name("demo") == "KarpenterLambdaNode-demo"
    assert node_role_name("c" * 44) == "KarpenterLambdaNode-" + "c" * 44        # 64 characters
    assert node_role_name("c" * 45) is None                                      # 65: the stack lets CFN name it
    assert stack_name("demo") == "KarpenterLambda-demo"


def test_only_ec2nodeclasses_with_another_role_warn():
    docs = [
        ("a.yaml", 0, {"kind": "EC2NodeClass", "metadata": {"name": "upstream"}, "spec": {"role": "KarpenterNodeRole-demo"}}),
        ("a.yaml", 1, {"kind": "EC2NodeClass", "metadata": {"name": "ours"}, "spec": {"role": "KarpenterLambdaNode-demo"}}),
        ("a.yaml", 2, {"kind": "EC2NodeClass", "metadata": {"name": "arn"},
                       "spec": {"role": "arn:aws:iam::123456789012:role/KarpenterLambdaNode-demo"}}),
        ("a.yaml", 3, {"kind": "EC2NodeClass", "metadata": {"name": "profile"}, "spec": {"instanceProfile": "p"}}),
        ("a.yaml", 4, {"kind": "NodePool", "metadata": {"name": "default"}, "spec": {"role": "x"}}),
    ]
    issues = node_role_warnings(docs, "demo")
    assert [(i.file, i.doc_index, i.name, i.path) for i in issues] == [("a.yaml", 0, "upstream", "spec.role")]
    assert str(issues[0]) == ("a.yaml:0: EC2NodeClass/upstream: spec.role: 'KarpenterNodeRole-demo' is not this stack's "
                              "node role: the functions may only pass 'KarpenterLambdaNode-demo' to EC2 (iam:PassRole), "
                              "so nodes of this class could never launch; set spec.role: KarpenterLambdaNode-demo")
    # another cluster's deployment passes another role: the same class is fine there only if it names that one
    assert [i.name for i in node_role_warnings(docs, "prod")] == ["upstream", "ours", "arn"]


def test_typed_objects_from_load_text_are_checked():
    result = load_text(NODECLASS.format(name="default", field="role", role="KarpenterNodeRole-demo"), "nc.yaml")
    assert result.ok, result.issues
    issues = node_role_warnings(result.of_kind("EC2NodeClass"), "demo")
    assert [(i.file, i.kind, i.name) for i in issues] == [("<input>", "EC2NodeClass", "default")]
    ok = load_text(NODECLASS.format(name="default", field="role", role="KarpenterLambdaNode-demo"), "nc.yaml")
    assert node_role_warnings(ok.objects, "demo") == []


def test_no_check_when_the_stack_generates_the_role_name():
    docs = [{"kind": "EC2NodeClass", "metadata": {"name": "x"}, "spec": {"role": "anything"}}]
    assert node_role_warnings(docs, "c" * 45) == []
    assert len(node_role_warnings(docs, "c" * 45, node_role="GivenRole")) == 1


def test_a_load_result_reports_file_document_and_line():
    from karpenter_lambda.api.manifests import load_text

    text = "---\n# first document: a NodePool-less comment\n---\n" + NODECLASS.format(
        name="upstream", field="role", role="KarpenterNodeRole-demo")
    result = load_text(text, "classes.yaml")
    assert result.ok, result.issues
    (issue,) = node_role_warnings(result, "demo")
    assert (issue.file, issue.doc_index, issue.name, issue.path) == ("classes.yaml", 1, "upstream", "spec.role")
    assert issue.line == text.splitlines().index("  role: KarpenterNodeRole-demo") + 1
