"""The watcher's own API client (kubeclient.KubeHTTP) the way a pod uses it: the service account's token and CA
files, over TLS, against a real HTTPS server on 127.0.0.1 (a certificate made here, by a CA made here)."""

import datetime
import ipaddress
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from karpenter_lambda_watcher import kubeclient
from karpenter_lambda_watcher.kubeclient import ApiError, KubeHTTP
from karpenter_lambda_watcher.reflector import lister


def _ca_and_cert(tmp_path, name):
    """(CA certificate path, server certificate path, server key path): a CA and a certificate for 127.0.0.1."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp_path / f"{name}-ca.crt", tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class _Server:
    """An HTTPS server answering ``GET /api/v1/pods`` with a pod list (or ``status`` with a Status object),
    recording each request's path and Authorization header."""

    def __init__(self, cert, key):
        self.seen: list[tuple[str, str | None]] = []
        self.status = 200
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.seen.append((self.path, self.headers.get("Authorization")))
                if outer.status == 200:
                    body = {"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "a"}}]}
                else:
                    body = {"kind": "Status", "status": "Failure", "code": outer.status,
                            "message": 'pods is forbidden: User "system:serviceaccount:x:y" cannot list resource "pods"'}
                data = json.dumps(body).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def tls(tmp_path):
    ca, cert, key = _ca_and_cert(tmp_path, "cluster")
    srv = _Server(str(cert), str(key))
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("token-1\n")
    (sa / "ca.crt").write_bytes(ca.read_bytes())
    yield srv, sa
    srv.close()


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_in_cluster_lists_over_tls_with_the_service_account_token_and_rereads_it(tls):
    srv, sa = tls
    clock = _Clock()
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(srv.port)}
    client = KubeHTTP.in_cluster(env, str(sa), clock=clock)
    assert client is not None and client.host == f"https://127.0.0.1:{srv.port}"
    get = lister(client, "/api/v1/pods")
    resp = get(limit=500, _continue="abc", _request_timeout=(5, 5))
    assert json.loads(resp.data)["items"] == [{"metadata": {"name": "a"}}]
    resp.release_conn()
    assert srv.seen[-1] == ("/api/v1/pods?limit=500&continue=abc", "Bearer token-1")
    # the kubelet rotates the projected token: the new one is used once the copy in memory is a minute old
    (sa / "token").write_text("token-2\n")
    clock.now += kubeclient.TOKEN_REREAD_SECONDS - 1
    get(watch=True, resource_version="7", allow_watch_bookmarks=True, _request_timeout=(5, 5)).release_conn()
    assert srv.seen[-1] == ("/api/v1/pods?watch=true&resourceVersion=7&allowWatchBookmarks=true", "Bearer token-1")
    clock.now += 1
    get(limit=1).release_conn()
    assert srv.seen[-1][1] == "Bearer token-2"
    # a token file that cannot be read for a moment: the copy in memory goes on being used
    (sa / "token").unlink()
    clock.now += kubeclient.TOKEN_REREAD_SECONDS
    get(limit=1).release_conn()
    assert srv.seen[-1][1] == "Bearer token-2"
    client.close()


def test_a_server_certificate_the_service_account_ca_did_not_sign_is_refused(tls, tmp_path):
    srv, sa = tls
    other_ca, _, _ = _ca_and_cert(tmp_path, "other")
    (sa / "ca.crt").write_bytes(other_ca.read_bytes())
    client = KubeHTTP.in_cluster({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(srv.port)},
                                 str(sa))
    with pytest.raises(urllib3.exceptions.SSLError, match="certificate verify failed"):
        lister(client, "/api/v1/pods")(limit=1)
    assert srv.seen == []


def test_api_errors_carry_the_status_and_the_servers_message(tls):
    srv, sa = tls
    srv.status = 403
    client = KubeHTTP.in_cluster({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(srv.port)},
                                 str(sa))
    with pytest.raises(ApiError) as e:
        lister(client, "/api/v1/pods")(limit=1)
    assert e.value.status == 403 and "cannot list resource" in e.value.reason


def test_in_cluster_needs_the_service_host_and_the_token_file(tmp_path):
    sa = tmp_path / "sa"
    sa.mkdir()
    assert KubeHTTP.in_cluster({}, str(sa)) is None
    env = {"KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert KubeHTTP.in_cluster(env, str(sa)) is None   # no token: not in a pod
    (sa / "token").write_text("t")
    assert KubeHTTP.in_cluster(env, str(sa)).host == "https://[fd00:10:96::1]:443"   # an IPv6 service address
    with pytest.raises(ValueError, match="must start with https:// or http://"):
        KubeHTTP("kubernetes.default.svc")
