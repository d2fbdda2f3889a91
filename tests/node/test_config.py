"""node.config: defaults, flags, config file, merge, errors."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from node.config import (
    ConfigError,
    ConfigExit,
    ServerConfig,
    dev_defaults,
    load,
    parse_duration,
    parse_flags,
)


def write(tmp_path: Path, text: str, name: str = "s.conf") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_defaults() -> None:
    cfg = load([])
    assert cfg == ServerConfig()
    assert (cfg.host, cfg.port, cfg.http_port, cfg.max_payload) == ("0.0.0.0", 4222, 0, 1048576)
    assert cfg.max_pending == 64 * 1024 * 1024 and cfg.max_connections == 65536
    assert cfg.ping_interval_s == 120.0 and cfg.ping_max == 2 and cfg.write_deadline_s == 10.0
    assert cfg.auth.timeout_s == 2.0 and cfg.tls is None and cfg.cluster is None
    assert cfg.logtime and not cfg.debug and not cfg.trace
    assert not cfg.jetstream.enabled and cfg.jetstream.max_memory_store == -1
    assert cfg.jetstream.sync_interval is None and cfg.jetstream.strict  # not configured
    assert cfg.jetstream.jetstream_dir == os.path.join(tempfile.gettempdir(), "nats", "jetstream")
    assert cfg.monitor_host == "0.0.0.0"


def test_dev_defaults() -> None:
    cfg = dev_defaults()
    assert cfg.port == 4222 and cfg.http_port == 8222
    assert cfg.jetstream.enabled and cfg.jetstream.store_dir == "./data"
    assert cfg.jetstream.jetstream_dir == os.path.join("./data", "jetstream")


@pytest.mark.parametrize(
    ("argv", "attr", "value"),
    [
        (["-a", "127.0.0.1"], "host", "127.0.0.1"),
        (["--addr", "h"], "host", "h"),
        (["-net=h"], "host", "h"),
        (["--net", "h"], "host", "h"),
        (["-p", "4333"], "port", 4333),
        (["-p", "-1"], "port", -1),
        (["--port=5"], "port", 5),
        (["-n", "n1"], "server_name", "n1"),
        (["--name", "n1"], "server_name", "n1"),
        (["-server_name", "n1"], "server_name", "n1"),
        (["-P", "/x.pid"], "pid_file", "/x.pid"),
        (["--pid", "/x.pid"], "pid_file", "/x.pid"),
        (["-m", "8222"], "http_port", 8222),
        (["--http_port", "-1"], "http_port", -1),
        (["-ms", "8443"], "https_port", 8443),
        (["--https_port", "8443"], "https_port", 8443),
        (["--client_advertise", "h:1"], "client_advertise", "h:1"),
        (["-ports_file_dir", "/d"], "ports_file_dir", "/d"),
        (["-l", "/l.log"], "log_file", "/l.log"),
        (["--log", "/l.log"], "log_file", "/l.log"),
        (["-T=false"], "logtime", False),
        (["--logtime=0"], "logtime", False),
        (["-T"], "logtime", True),
        (["-D"], "debug", True),
        (["--debug"], "debug", True),
        (["-V"], "trace", True),
        (["--trace"], "trace", True),
        (["-VV"], "trace_verbose", True),
        (["--max_payload", "2048"], "max_payload", 2048),
    ],
)
def test_flag_forms(argv: list[str], attr: str, value: object) -> None:
    assert getattr(load(argv), attr) == value


def test_combined_debug_trace_flags() -> None:
    c = load(["-DV"])
    assert (c.debug, c.trace, c.trace_verbose) == (True, True, False)
    c = load(["--DVV"])
    assert (c.debug, c.trace, c.trace_verbose) == (True, True, True)
    c = load(["-VV"])
    assert (c.debug, c.trace, c.trace_verbose) == (False, True, True)


def test_jetstream_auth_flags() -> None:
    c = load(["-js", "-sd", "/data", "--user", "u", "--pass", "p"])
    assert c.jetstream.enabled and c.jetstream.store_dir == "/data"
    assert c.jetstream.jetstream_dir == "/data/jetstream"
    assert (c.auth.user, c.auth.password) == ("u", "p")
    assert load(["--jetstream", "--store_dir=/d", "--auth", "tok"]).auth.token == "tok"


def test_tls_flags() -> None:
    c = load(
        ["--tls", "--tlscert", "c.pem", "--tlskey", "k.pem", "--tlscacert", "ca.pem", "--tlsverify"]
    )
    assert c.tls is not None
    assert (c.tls.cert_file, c.tls.key_file, c.tls.ca_file, c.tls.verify) == (
        "c.pem",
        "k.pem",
        "ca.pem",
        True,
    )
    assert c.auth.timeout_s == c.tls.timeout_s + 1.0
    with pytest.raises(ConfigError, match="certificate must be present"):
        load(["--tls"])
    with pytest.raises(ConfigError, match="private key must be present"):
        load(["--tlscert", "c.pem"])


def test_cluster_flags() -> None:
    c = load(
        [
            "--cluster", "nats://127.0.0.1:6333",
            "--routes", "nats://a:1, nats://b:2",
            "--cluster_name", "C1",
            "--no_advertise",
            "--cluster_advertise", "x:1",
            "--connect_retries", "5",
            "--cluster_secret", "s3",
        ]
    )  # fmt: skip
    assert c.cluster is not None
    assert (c.cluster.host, c.cluster.port, c.cluster.name) == ("127.0.0.1", 6333, "C1")
    assert c.cluster.routes == ["nats://a:1", "nats://b:2"]
    assert c.cluster.no_advertise and c.cluster.advertise == "x:1"
    assert c.cluster.connect_retries == 5 and c.cluster.secret == "s3"
    c = load(["--cluster_listen", "nats://0.0.0.0:-1"])
    assert c.cluster is not None and c.cluster.port == -1
    with pytest.raises(ConfigError, match="solicited routes require cluster"):
        load(["--routes", "nats://a:1"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-foo"], "flag provided but not defined: -foo"),
        (["--foo=1"], "flag provided but not defined: -foo"),
        (["-p"], "flag needs an argument: -p"),
        (["-p", "abc"], 'invalid value "abc" for flag -p'),
        (["-T=maybe"], 'invalid boolean value "maybe"'),
        (["---p", "1"], "bad flag syntax"),
        (["extra"], 'unrecognized command: "extra"'),
        (["-t"], "must specify [-c, --config]"),
        (["-n", "a b"], "server name cannot contain spaces"),
    ],
)
def test_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as ei:
        load(argv)
    assert message in str(ei.value)


def test_help_version() -> None:
    for argv in (["-h"], ["--help"], ["help"]):
        with pytest.raises(ConfigExit) as ei:
            load(argv)
        assert ei.value.code == 0 and "Usage: trijet-server [options]" in ei.value.text
        assert "-js, --jetstream" in ei.value.text
    with pytest.raises(ConfigExit) as ei:
        load(["-v"])
    assert ei.value.text.startswith("trijet-server: v")


def test_test_config_flag(tmp_path: Path) -> None:
    path = write(tmp_path, "port: 4333\n")
    with pytest.raises(ConfigExit) as ei:
        load(["-t", "-c", path])
    assert ei.value.code == 0 and ei.value.stream == "stderr"
    assert f"trijet-server: configuration file {path} is valid (sha256:" in ei.value.text


def test_parse_flags_go_rules() -> None:
    assert parse_flags(["-p", "1", "--", "version"]) == {"port": 1, "version": True}
    assert parse_flags(["-D=true", "-D=false"]) == {"debug": False}
    assert parse_flags(["-p=0x10"]) == {"port": 16}


FULL = """
# A realistic node config
PASS: secret
server_name: n1
listen: 127.0.0.1:15201
http: 127.0.0.1:18201
max_payload: 2MB
max_connections: 100
ping_interval: "30s"
write_deadline: "2s"
lame_duck_duration: "45s"
lame_duck_grace_period: "5s"
server_tags: ["az:1", "region:eu"]
no_header_support: false
jetstream {
  store_dir: "/var/js"
  max_mem: 256MB
  max_file: 1GB
  domain: hub
  sync_interval: always
  unique_tag: "AZ:"
  limits { max_ha_assets: 10, duplicate_window: "1m" }
}
cluster {
  name: C1
  listen: 127.0.0.1:16201
  routes: [nats-route://127.0.0.1:16201, nats-route://127.0.0.1:16202]
  authorization { user: ru, password: rp, timeout: 3 }
  pool_size: 1
  secret: raftsecret
}
authorization {
  timeout: "5s"
  default_permissions: { subscribe: "pub.>" }
  users: [
    {user: a, password: $PASS, permissions: {publish: {allow: ["a.>"], deny: "a.b"}, allow_responses: {max: 5, expires: "1m"}}}
    {user: b, password: x}
    {nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4}
  ]
}
no_auth_user: b
"""


def test_full_file(tmp_path: Path) -> None:
    c = load(["-c", write(tmp_path, FULL)])
    assert (c.server_name, c.host, c.port) == ("n1", "127.0.0.1", 15201)
    assert (c.http_host, c.http_port, c.monitor_host) == ("127.0.0.1", 18201, "127.0.0.1")
    assert c.max_payload == 2 * 1024 * 1024 and c.max_connections == 100
    assert (c.ping_interval_s, c.write_deadline_s) == (30.0, 2.0)
    assert (c.lame_duck_duration_s, c.lame_duck_grace_period_s) == (45.0, 5.0)
    assert c.server_tags == ["az:1", "region:eu"]
    js = c.jetstream
    assert js.enabled and js.store_dir == "/var/js" and js.domain == "hub"
    assert (js.max_memory_store, js.max_file_store) == (256 * 1024**2, 1024**3)
    assert js.sync_interval == "always" and js.unique_tag == "az:"
    assert js.max_ha_assets == 10 and js.limits["duplicate_window"] == 60.0
    cl = c.cluster
    assert cl is not None and (cl.name, cl.host, cl.port, cl.pool_size) == (
        "C1",
        "127.0.0.1",
        16201,
        1,
    )
    assert cl.routes == ["nats-route://127.0.0.1:16201", "nats-route://127.0.0.1:16202"]
    assert (cl.user, cl.password, cl.auth_timeout_s, cl.secret) == ("ru", "rp", 3.0, "raftsecret")
    a = c.auth
    assert a.timeout_s == 5.0 and a.no_auth_user == "b"
    assert [u.user for u in a.users] == ["a", "b", None]
    ua = a.users[0]
    assert ua.password == "secret" and ua.permissions is not None
    assert ua.permissions.publish is not None
    assert ua.permissions.publish.allow == ["a.>"] and ua.permissions.publish.deny == ["a.b"]
    assert ua.permissions.allow_responses is not None
    assert (ua.permissions.allow_responses.max_msgs, ua.permissions.allow_responses.expires_s) == (
        5,
        60.0,
    )
    ub = a.users[1]
    assert ub.permissions is not None and ub.permissions.subscribe is not None
    assert ub.permissions.subscribe.allow == ["pub.>"]  # default_permissions applied
    assert a.users[2].nkey is not None
    assert c.warnings == []
    assert c.config_file is not None and c.config_digest and c.config_digest.startswith("sha256:")


def test_flags_override_file(tmp_path: Path) -> None:
    path = write(tmp_path, "port: 1111\ndebug: true\nlogtime: true\njetstream: enabled\n")
    c = load(["-c", path, "-p", "2222", "-D=false", "-T=false"])
    assert (c.port, c.debug, c.logtime, c.jetstream.enabled) == (2222, False, False, True)


def test_allow_responses_true_limits_publish(tmp_path: Path) -> None:
    path = write(
        tmp_path, "authorization { users: [ {user: a, permissions: {allow_responses: true}} ] }\n"
    )
    perms = load(["-c", path]).auth.users[0].permissions
    assert perms is not None and perms.publish is not None and perms.publish.allow == []
    assert perms.allow_responses is not None and perms.allow_responses.max_msgs == 1


def test_jetstream_forms(tmp_path: Path) -> None:
    assert load(["-c", write(tmp_path, "jetstream: true\n")]).jetstream.enabled
    assert load(["-c", write(tmp_path, "jetstream: enabled\n")]).jetstream.enabled
    assert not load(["-c", write(tmp_path, "jetstream: disabled\n")]).jetstream.enabled
    assert not load(["-c", write(tmp_path, "jetstream { enabled: false }\n")]).jetstream.enabled
    c = load(["-c", write(tmp_path, 'store_dir: /top\njetstream { sync: "1s" }\n')])
    assert c.jetstream.store_dir == "/top" and c.jetstream.sync_interval == 1.0


@pytest.mark.parametrize(
    "setting",
    [
        "compression: s2_auto",
        "compression: s2_fast",
        "compression: on",
        "compression: true",
        "compression: { mode: s2_best, rtt_thresholds: [10ms] }",
    ],
)
def test_leafnode_s2_compression_is_refused(tmp_path: Path, setting: str) -> None:
    """trijet has no s2 codec: a configured s2 mode (block or remote) stops the start with
    an error naming it; off, false and accept are honoured."""
    for text in (
        f"leafnodes {{ port: 7422, {setting} }}\n",
        f'leafnodes {{ remotes: [ {{ url: "nats://h:1", {setting} }} ] }}\n',
    ):
        with pytest.raises(ConfigError, match=r"compression .* not supported by trijet"):
            load(["-c", write(tmp_path, text)])
    for ok in ("off", "false", "accept", "{ mode: off }"):
        c = load(["-c", write(tmp_path, f"leafnodes {{ port: 7422, compression: {ok} }}\n")])
        assert c.leafnodes is not None


@pytest.mark.parametrize(
    "setting,named",
    [
        ("s2_auto", "s2_auto"),
        ("s2_fast", "s2_fast"),
        ("on", "on"),
        ("true", "on"),
        ("{ mode: s2_best, rtt_thresholds: [10ms] }", "s2_best"),
        ("bogus", "bogus"),
    ],
)
def test_cluster_s2_compression_is_refused(tmp_path: Path, setting: str, named: str) -> None:
    """Routes as leaf links: an s2 mode stops the start with an error naming it (trijet
    has no s2 codec); off, false and accept (nats-server's default for routes: compress
    only if the peer asks, which trijet's INFO never does) are accepted without a
    warning."""
    text = f"cluster {{ name: C, port: -1, compression: {setting} }}\n"
    with pytest.raises(ConfigError, match=f'cluster compression "{named}" is not supported'):
        load(["-c", write(tmp_path, text)])
    for ok in ("off", "false", "accept", "disabled", "{ mode: accept }"):
        c = load(["-c", write(tmp_path, f"cluster {{ name: C, port: -1, compression: {ok} }}\n")])
        assert c.cluster is not None and not any("compression" in w for w in c.warnings)


def test_leafnodes_block(tmp_path: Path) -> None:
    text = """
accounts { A: {}, L: {} }
leafnodes {
  listen: "127.0.0.1:7422"
  authorization { user: lu, password: lp, account: A, timeout: 3 }
  remotes: [
    { url: "nats://u:p@hub:7422", account: L }
    { urls: ["nats://h1:7422", "nats://h2:7422"] }
  ]
  reconnect: "250ms"
  compression: off
}
"""
    c = load(["-c", write(tmp_path, text)])
    lf = c.leafnodes
    assert lf is not None
    assert (lf.host, lf.port, lf.user, lf.password, lf.account) == (
        "127.0.0.1",
        7422,
        "lu",
        "lp",
        "A",
    )
    assert (lf.auth_timeout_s, lf.reconnect_s) == (3.0, 0.25)
    assert [r.urls for r in lf.remotes] == [
        ["nats://u:p@hub:7422"],
        ["nats://h1:7422", "nats://h2:7422"],
    ]
    assert lf.remotes[0].account == "L" and lf.remotes[1].account is None
    assert not any("compression" in w for w in c.warnings)  # off: what trijet does
    with pytest.raises(ConfigError, match="requires at least one url"):
        load(["-c", write(tmp_path, "leafnodes { remotes: [ { account: A } ] }\n")])
    tls = load(
        [
            "-c",
            write(
                tmp_path,
                "leafnodes { port: 1, tls { cert_file: c, key_file: k, ca_file: a, verify: true }"
                ', remotes: [ { url: "nats://h:1", tls { ca_file: a } } ] }\n',
            ),
        ]
    ).leafnodes
    assert tls is not None and tls.tls is not None and tls.remotes[0].tls is not None
    assert (tls.tls.cert_file, tls.tls.ca_file, tls.tls.verify) == ("c", "a", True)
    assert (tls.remotes[0].tls.ca_file, tls.remotes[0].tls.cert_file) == ("a", "")
    # what would leave a link unencrypted, unauthenticated or unfiltered is refused
    for bad in (
        "leafnodes { port: 7422, tls { cert_file: c, key_file: k, handshake_first: true } }",
        'leafnodes { remotes: [ { url: "nats://h:1", tls { handshake_first: true } } ] }',
        'leafnodes { remotes: [ { url: "nats://h:1", credentials: "/x.creds" } ] }',
        'leafnodes { remotes: [ { url: "nats://h:1", deny_imports: ["x"] } ] }',
    ):
        with pytest.raises(ConfigError, match="not supported by trijet yet"):
            load(["-c", write(tmp_path, bad + "\n")])
    users = load(
        [
            "-c",
            write(
                tmp_path,
                "accounts { A: {}, B: {} }\nleafnodes { port: 1, authorization { users: ["
                "{user: a, password: pa, account: A}, {user: b, password: pb, account: B}] } }\n",
            ),
        ]
    ).leafnodes
    assert users is not None and [(u.user, u.password, u.account) for u in users.users] == [
        ("a", "pa", "A"),
        ("b", "pb", "B"),
    ]
    with pytest.raises(ConfigError, match='account "NOPE" not found'):
        load(
            [
                "-c",
                write(
                    tmp_path, 'leafnodes { remotes: [ { url: "nats://h:1", account: NOPE } ] }\n'
                ),
            ]
        )


def test_tls_block_and_auth_timeout(tmp_path: Path) -> None:
    c = load(
        ["-c", write(tmp_path, "tls { cert_file: c, key_file: k, timeout: 3, verify: true }\n")]
    )
    assert c.tls is not None and (c.tls.timeout_s, c.tls.verify) == (3.0, True)
    assert c.auth.timeout_s == 4.0  # nats: tls timeout + 1 when not configured


def test_http_listen_forms(tmp_path: Path) -> None:
    c = load(["-c", write(tmp_path, "listen: 4333\nhttp: 8333\nhttps_port: 8443\n")])
    assert (c.port, c.http_port, c.https_port, c.http_host) == (4333, 8333, 8443, None)
    c = load(["-c", write(tmp_path, "net: 127.0.0.1\nmonitor_port: 1\n")])
    assert (c.host, c.http_port, c.monitor_host) == ("127.0.0.1", 1, "127.0.0.1")


def test_unimplemented_known_keys_warn(tmp_path: Path) -> None:
    c = load(
        [
            "-c",
            write(
                tmp_path, "port: 1\ngateway { name: g }\nwebsocket { port: 1 }\nmqtt { port: 1 }\n"
            ),
        ]
    )
    assert len(c.warnings) == 3 and all("not supported by trijet" in w for w in c.warnings)
    assert ":2:1:" in c.warnings[0]
    c = load(["-c", write(tmp_path, "write_deadline: 5\n")])
    assert c.write_deadline_s == 5.0 and "should be converted to a duration" in c.warnings[0]


def test_variable_definitions_are_not_unknown_fields(tmp_path: Path) -> None:
    c = load(["-c", write(tmp_path, "MYPORT: 4999\nport: $MYPORT\n")])
    assert c.port == 4999


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo: 1\n", ':1:1: unknown field "foo"'),
        ("port: 1\n  bogus: 2\n", ':2:3: unknown field "bogus"'),
        ('port: "abc"\n', ":1:1: port: expected an integer, got string 'abc'"),
        ("debug: 1\n", ":1:1: debug: expected a boolean"),
        ('ping_interval: "2x"\n', ':1:1: error parsing ping_interval: time: invalid duration "2x"'),
        ('lame_duck_duration: "10s"\n', "minimum is 30 seconds"),
        ("server_name: 'a b'\n", "server name cannot contain spaces"),
        ("listen: 'nope'\n", "could not parse address string"),
        ("jetstream { bogus: 1 }\n", ':1:13: unknown field "bogus"'),
        ("jetstream: maybe\n", "Expected 'enabled' or 'disabled'"),
        ("cluster { name: C, nope: 1 }\n", 'unknown field "nope"'),
        ("authorization { user: a, token: t }\n", "Cannot have a user/pass and token"),
        (
            "authorization { user: a, users: [] }\n",
            "Can not have a single user/pass and a users array",
        ),
        ("authorization { users: [ {password: x} ] }\n", "User entry requires a user"),
        ("authorization { users: [ {user: a}, {user: a} ] }\n", 'Duplicate user "a" detected'),
        ("authorization { users: [ {nkey: bad} ] }\n", "Not a valid public nkey for a user"),
        (
            "authorization { users: [ {user: a, permissions: {publish: 'a..b'}} ] }\n",
            'subject "a..b" is not a valid subject',
        ),
        (
            "authorization { permissions: { pubb: x } }\n",
            'Unknown field "pubb" parsing permissions',
        ),
        ("tls { cert_file: c }\n", "'cert_file' and 'key_file' are required"),
        ("store_dir: a\njetstream { store_dir: b }\n", "Duplicate 'store_dir' configuration"),
        ("max_payload: 4GB\n", "max_payload value is too big"),
        ("port: $UNDEFINED_VAR_XYZ\n", ":1:7: variable reference for 'UNDEFINED_VAR_XYZ'"),
        ("port: [1,\n", "EOF processing array"),
    ],
)
def test_bad_file_values(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load(["-c", path])
    msg = str(ei.value)
    assert message in msg, msg
    assert msg.startswith(path + ":"), msg


def test_all_errors_reported_together(tmp_path: Path) -> None:
    path = write(tmp_path, "foo: 1\nport: x\nbar: 2\n")
    with pytest.raises(ConfigError) as ei:
        load(["-c", path])
    lines = str(ei.value).splitlines()
    assert len(lines) == 3 and [ln.split(":")[1] for ln in lines] == ["1", "2", "3"]


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="error opening config file"):
        load(["-c", "/nonexistent/trijet.conf"])


def test_parse_duration() -> None:
    assert parse_duration("2m") == 120.0
    assert parse_duration("1h2m3.5s") == 3723.5
    assert parse_duration("500ms") == 0.5
    assert parse_duration("-1s") == -1.0
    assert parse_duration("0") == 0.0
    assert parse_duration("1us") == pytest.approx(1e-6)
    for bad in ("", "1", "1d", "s", "1.5.5s"):
        with pytest.raises(ValueError):
            parse_duration(bad)


@pytest.mark.parametrize(
    "text",
    [
        "operator: /path/to/op.jwt\n",
        "resolver: MEMORY\n",
        "trusted_keys: [x]\n",
    ],
)
def test_operator_mode_refused(tmp_path: Path, text: str) -> None:
    """JWT operator mode is an error at start, never silently dropped."""
    path = write(tmp_path, "port: 1\n" + text)
    with pytest.raises(ConfigError) as ei:
        load(["-c", path])
    msg = str(ei.value)
    key = text.split(":")[0].strip()
    assert msg.startswith(f"{path}:2:1: operator mode is not supported yet"), msg
    assert f'field "{key}"' in msg


ACCOUNTS_CONF = """
jetstream: enabled
authorization { users: [{user: g, password: g}] }
accounts {
  A: { users: [{user: a, password: a}, {nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4}] }
  B: {
    users: [{user: b, password: b}]
    default_permissions: { publish: "b.>" }
    jetstream: { max_mem: 1M, max_file: 2G, max_streams: 3, consumers: 4 }
  }
  SYS: { users: [{user: s, password: s}] }
}
system_account: SYS
no_auth_user: a
"""


def test_accounts_block_read(tmp_path: Path) -> None:
    from node.confaccounts import jetstream_account

    c = load(["-c", write(tmp_path, ACCOUNTS_CONF)])
    assert sorted(c.accounts) == ["A", "B", "SYS"]
    assert c.system_account == "SYS"
    by = {u.user or u.nkey: u for u in c.auth.users}
    assert by["g"].account == "$G" and by["a"].account == "A" and by["s"].account == "SYS"
    assert by["UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"].account == "A"
    assert by["b"].permissions.publish.allow == ["b.>"] and by["a"].permissions is None
    assert c.accounts["B"].jetstream and not c.accounts["A"].jetstream
    assert jetstream_account(c) == "B"
    assert c.accounts["B"].js_limits == {
        "max_memory": 1_000_000,
        "max_storage": 2_000_000_000,
        "max_streams": 3,
        "max_consumers": 4,
    }
    assert c.auth.no_auth_user == "a"


def test_accounts_defaults_and_global_only(tmp_path: Path) -> None:
    from node.confaccounts import jetstream_account

    c = load(["-c", write(tmp_path, "jetstream: enabled\n")])
    assert c.system_account == "$SYS" and c.accounts == {}
    assert jetstream_account(c) == "$G"
    # only the system account configured: JetStream stays in $G, as nats-server
    text = "jetstream: enabled\naccounts { SYS: { users: [{user: s, password: s}] } }\n"
    text += "system_account: SYS\n"
    assert jetstream_account(load(["-c", write(tmp_path, text)])) == "$G"


def test_jetstream_in_several_accounts(tmp_path: Path) -> None:
    """On one server every account that enables JetStream gets it (never the system
    account), in configuration order; the first is the home account."""
    from node.confaccounts import jetstream_account, jetstream_accounts

    text = "jetstream: enabled\naccounts {\n  B: { jetstream: enabled }\n  C: {}\n"
    text += "  A: { jetstream: { max_mem: 1M } }\n  SYS: {}\n}\nsystem_account: SYS\n"
    c = load(["-c", write(tmp_path, text)])
    assert jetstream_accounts(c) == ["B", "A"]
    assert jetstream_account(c) == "B"
    c = load(["-c", write(tmp_path, text.replace("jetstream: enabled\naccounts", "accounts"))])
    assert jetstream_accounts(c) == [] and jetstream_account(c) is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("system_account: NOPE\n", "error resolving system account: account missing"),
        (
            "accounts { A: { users: [{user: x, password: a}] }, B: { users: [{user: x, password: b}] } }\n",
            'Duplicate user "x" detected',
        ),
        ("accounts { A: {} }\nno_auth_user: zz\n", 'no_auth_user: "zz" not present'),
        (
            "accounts { A: { mappings: { a: b } } }\n",
            'account subject mappings are not supported yet (account "A")',
        ),
        (
            "accounts { A: { jetstream: { max_bytes_required: true } } }\n",
            'per-account JetStream field "max_bytes_required" is not supported yet (account "A")',
        ),
        (
            "accounts { A: { jetstream: { max_ack_pending: 100 } } }\n",
            'per-account JetStream field "max_ack_pending" is not supported yet (account "A")',
        ),
        (
            "jetstream: enabled\naccounts { A: {}, B: {} }\n",
            "JetStream is enabled but no account enables it",
        ),
        ('accounts { "$G": {} }\n', '"$G" is a reserved account'),
        # tiered limits come only from account JWTs in nats-server 2.15.1: its config
        # file knows no tier keys (checked with -t)
        (
            "accounts { A: { jetstream: { tiers: { R1: { max_mem: 1M } } } } }\n",
            'unknown field "tiers"',
        ),
        ("accounts { A: { jetstream: { R3: { max_mem: 1M } } } }\n", 'unknown field "R3"'),
    ],
)
def test_accounts_config_errors(tmp_path: Path, text: str, needle: str) -> None:
    """What trijet cannot honour is an error at start that names it."""
    path = write(tmp_path, "port: 1\n" + text)
    with pytest.raises(ConfigError) as ei:
        load(["-c", path])
    assert needle in str(ei.value), str(ei.value)
    assert str(ei.value).startswith(f"{path}:"), str(ei.value)


def test_jetstream_in_several_accounts_accepted_in_a_cluster(tmp_path: Path) -> None:
    """JetStream in several accounts is served in a cluster as on one server."""
    text = "server_name: n1\ncluster { name: C, port: -1 }\njetstream: enabled\n"
    text += "accounts { A: { jetstream: enabled }, B: { jetstream: enabled } }\n"
    from node.confaccounts import jetstream_accounts

    cfg = load(["-c", write(tmp_path, text)])
    assert jetstream_accounts(cfg) == ["A", "B"] and cfg.cluster is not None


def test_no_auth_user_without_accounts_still_served(tmp_path: Path) -> None:
    """``no_auth_user`` naming an ``authorization`` user works in one account."""
    text = "authorization { users: [{user: a, password: b}] }\nno_auth_user: a\n"
    c = load(["-c", write(tmp_path, text)])
    assert c.auth.no_auth_user == "a"


def test_raft_journal_bounds_are_a_trijet_extension(tmp_path: Path) -> None:
    conf = "jetstream { store_dir: /tmp/x, raft_journal_entries_max: 500, raft_journal_bytes_max: 8MB }\n"
    c = load(["-c", write(tmp_path, conf)])
    assert c.jetstream.raft_journal_entries_max == 500
    assert c.jetstream.raft_journal_bytes_max == 8 * 1024 * 1024
    d = load(["-c", write(tmp_path, "jetstream { store_dir: /tmp/x }\n")])
    assert d.jetstream.raft_journal_entries_max == 50_000


EXPORTS_CONF = """
accounts {
  A: {
    exports: [
      {stream: "ev.>"}
      {stream: "priv.>", accounts: [C]}
      {service: "svc.>", response: stream, response_threshold: "5s"}
    ]
  }
  B: {
    imports: [
      {stream: {account: A, subject: "ev.>"}, prefix: "froma"}
      {stream: {account: A, subject: "ev.x"}, to: "local.x"}
      {service: {account: A, subject: "svc.one"}, to: "one"}
    ]
  }
  C: { imports: [{stream: {account: A, subject: "priv.>"}}] }
}
"""


def test_exports_and_imports_read(tmp_path: Path) -> None:
    c = load(["-c", write(tmp_path, EXPORTS_CONF)])
    a = c.accounts["A"]
    assert [(e.kind, e.subject, e.accounts) for e in a.exports] == [
        ("stream", "ev.>", None),
        ("stream", "priv.>", ["C"]),
        ("service", "svc.>", None),
    ]
    assert (a.exports[2].response, a.exports[2].response_threshold_s) == ("Stream", 5.0)
    b = c.accounts["B"]
    assert [(i.kind, i.account, i.subject, i.to) for i in b.imports] == [
        ("stream", "A", "ev.>", "froma.ev.>"),
        ("stream", "A", "ev.x", "local.x"),
        ("service", "A", "svc.one", "one"),
    ]


@pytest.mark.parametrize(
    ("imp", "needle"),
    [
        (
            '{stream: {account: A, subject: "nope.>"}}',
            'Error adding stream import "nope.>": stream import not authorized',
        ),
        (
            '{stream: {account: A, subject: "priv.>"}}',
            'Error adding stream import "priv.>": stream import not authorized',
        ),
        (
            '{service: {account: A, subject: "nosvc"}}',
            'Error adding service import "nosvc": service import not authorized',
        ),
        ('{stream: {account: Z, subject: "ev.>"}}', '"Z" account not defined for stream import'),
        (
            '{stream: {account: A, subject: "ev.>"}, prefix: "p", to: "x"}',
            "Stream import can not have a 'prefix' and a 'to' property",
        ),
    ],
)
def test_imports_refused_as_nats_server(tmp_path: Path, imp: str, needle: str) -> None:
    """The reference's messages (observed on nats-server 2.15.1)."""
    text = (
        'accounts {\n A: { exports: [{stream: "ev.>"}, {stream: "priv.>", accounts: [C]}, '
        f'{{service: "svc"}}] }}\n B: {{ imports: [{imp}] }}\n C: {{}}\n}}\n'
    )
    with pytest.raises(ConfigError) as ei:
        load(["-c", write(tmp_path, "port: 1\n" + text)])
    assert needle in str(ei.value), str(ei.value)


def test_account_keys_any_case(tmp_path: Path) -> None:
    """nats-server's keys are case-insensitive; so are the cross-key checks."""
    text = "ACCOUNTS { A: { users: [{user: a, password: a}] } }\nNO_AUTH_USER: zz\n"
    with pytest.raises(ConfigError) as ei:
        load(["-c", write(tmp_path, text)])
    assert 'no_auth_user: "zz" not present' in str(ei.value)
    ok = load(["-c", write(tmp_path, "ACCOUNTS { A: {} }\nSYSTEM_ACCOUNT: A\n")])
    assert ok.system_account == "A"
