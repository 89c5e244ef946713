"""The one egress function (contract §10): redaction and visible escaping of every string.

Unit and property tests of the egress (`egress/`) itself; test_egress_paths.py drives the same through every
way out of the server (envelope, progress, stderr log, audit line, CLI output).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.egress import clean as egress
from ito_training_mcp.egress import logs
from ito_training_mcp.envelope import ErrorCode, Gate, refusal, success

from .conftest import CANARY_AWS, CANARY_GITHUB, CANARY_TOKEN

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx3...\n-----END RSA PRIVATE KEY-----"
DATABASE_URL = "postgres://trainer:Winter2026!db@db.internal:5432/runs"
SECRETS = [CANARY_TOKEN, CANARY_GITHUB, CANARY_AWS, f"Bearer {CANARY_TOKEN}"]
RELAYED_SECRETS = [*SECRETS, PEM, DATABASE_URL, "password=hunter2hunter2"]

# Every code point Python does not call printable, by range: what may never leave raw.
CONTROL_AND_BIDI = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F),
                                     *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C, 0x2028, 0x2029)]
OTHER_UNPRINTABLE = ["\u200b", "\u200d", "\ufeff", "\u00ad", "\U000e0041", "\ud800", "\ue000", "\u00a0", "\u3000",
                     "\U0010ffff", "\u0378"]


@pytest.fixture(autouse=True, scope="module")
def registered_canary() -> None:
    Credential(CANARY_TOKEN, "ITO_API_KEY")  # registers the configured credential, as resolving it does


def raw_unprintable(text: str, allowed: str = "") -> list[str]:
    return [ch for ch in text if not ch.isprintable() and ch not in allowed]


@pytest.mark.parametrize("ch", CONTROL_AND_BIDI + OTHER_UNPRINTABLE, ids=lambda c: f"U+{ord(c):04X}")
def test_every_unprintable_character_is_shown_visibly(ch: str) -> None:
    out = egress.clean_line(f"a{ch}b")
    assert out == f"a⟨U+{ord(ch):04X}⟩b"
    assert egress.clean_line(out) == out  # idempotent: cleaning twice changes nothing


def test_newline_and_tab_survive_only_in_multiline_text() -> None:
    text = "line 1\n\tline 2\r\x1b[2Kline 3"
    assert egress.clean_text(text, multiline=True) == "line 1\n\tline 2⟨U+000D⟩⟨U+001B⟩[2Kline 3"
    assert egress.clean_line(text) == "line 1⟨U+000A⟩⟨U+0009⟩line 2⟨U+000D⟩⟨U+001B⟩[2Kline 3"


@pytest.mark.parametrize("secret", SECRETS)
def test_credentials_and_token_shapes_are_redacted(secret: str) -> None:
    out = egress.clean_line(f"stage {secret} done")
    assert CANARY_TOKEN not in out and CANARY_GITHUB not in out and CANARY_AWS not in out
    assert "<redacted>" in out


@pytest.mark.parametrize("hider", ["\u200b", "\u202e", "\x00", "\u2060", "\U000e0020"])
def test_a_credential_split_by_invisible_characters_is_replaced_whole(hider: str) -> None:
    split = CANARY_TOKEN[:10] + hider + CANARY_TOKEN[10:]
    out = egress.clean_line(f"token={split}")
    assert out == egress.HIDDEN_CREDENTIAL_NOTE
    assert CANARY_TOKEN[10:] not in out


@pytest.mark.parametrize("hider", ["\u200b", "\u00a0", "\x00", "\ue000", "\U000e0020"])
def test_a_credential_split_by_invisible_characters_in_a_long_text_is_replaced_whole(hider: str) -> None:
    """The same in a text long enough to be stripped by search rather than character by character."""
    split = CANARY_TOKEN[:10] + hider + CANARY_TOKEN[10:]
    out = egress.clean_text(f"{'log line ' * 200}token={split}\n{'more ' * 200}", multiline=True)
    assert out == egress.HIDDEN_CREDENTIAL_NOTE


SHAPED = RELAYED_SECRETS[1:]  # every kind the manifest scanner knows (the configured token is no shape)


@pytest.mark.parametrize("secret", SHAPED, ids=range(len(SHAPED)))
def test_relayed_text_passes_the_full_scanner(secret: str) -> None:
    out = egress.relayed_line(f"checkpoint written; {secret}")
    assert out.startswith("<redacted: looked like a credential (")
    assert "Winter2026" not in out and "PRIVATE KEY" not in out


def test_an_envelope_keeps_its_multiline_fields_and_relays_nothing_secret() -> None:
    data: dict[str, Any] = {
        "review_text": "Model: x\nSHA-256: abc",
        "review": {"description": "a\n\tb", "model": {"name": "m\u202e"}},
        "stages": [{"name": f"sft\x1b[31m{CANARY_TOKEN}", "gate": {"evals": {PEM: DATABASE_URL, "ok": 0.5}}}],
        "lines": [{"message": f"line\nfake line {DATABASE_URL}"}],
    }
    env = egress.clean_envelope(success(data, notice="n", live_api_contacted=True))
    assert env.data is not None
    assert env.data["review_text"] == "Model: x\nSHA-256: abc"
    assert env.data["review"]["description"] == "a\n\tb"
    assert env.data["review"]["model"]["name"] == "m⟨U+202E⟩"
    wire = env.to_json()
    for forbidden in (CANARY_TOKEN, "PRIVATE KEY", "Winter2026", "\x1b", "\u202e"):
        assert forbidden not in wire
    assert "\\n" not in json.dumps(env.data["lines"])  # a relayed line cannot start another line
    [evals] = [s["gate"]["evals"] for s in env.data["stages"]]
    assert evals["ok"] == 0.5 and len(evals) == 2


def test_details_are_relayed_text_and_messages_are_ours() -> None:
    env = refusal(ErrorCode.BACKEND_ERROR, "The backend failed.\x1b[2J", live_api_contacted=True, gate=Gate.CREATE,
                  details={"backend_code": "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "status": 500})
    out = egress.clean_envelope(env)
    assert out.error is not None and out.error.details is not None
    assert out.error.details["backend_code"].startswith("<redacted")
    assert out.error.message == "The backend failed.⟨U+001B⟩[2J"


_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40) | st.text(max_size=20)
_HOSTILE = st.one_of(
    _ANY_TEXT,
    st.sampled_from(RELAYED_SECRETS + CONTROL_AND_BIDI + OTHER_UNPRINTABLE),
    st.tuples(_ANY_TEXT, st.sampled_from(RELAYED_SECRETS), _ANY_TEXT).map("".join),
    st.tuples(st.sampled_from(CONTROL_AND_BIDI), _ANY_TEXT).map("".join),
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _HOSTILE,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_HOSTILE, inner, max_size=4),
    max_leaves=20,
)


# Messages and notices are this server's own text (never relayed), so they get redaction and escaping
# but not the relay scanner: they are drawn without the shapes only that scanner knows.
_OWN_TEXT = st.one_of(_ANY_TEXT, st.tuples(_ANY_TEXT, st.sampled_from(SECRETS + CONTROL_AND_BIDI), _ANY_TEXT).map("".join))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.dictionaries(_HOSTILE, _JSON, max_size=5), message=_OWN_TEXT)
def test_property_nothing_unprintable_or_secret_leaves_in_an_envelope(data: dict[str, Any], message: str) -> None:
    for env in (success(data, notice="n", live_api_contacted=False),
                refusal(ErrorCode.BACKEND_ERROR, message, live_api_contacted=True, gate=None, details=data)):
        out = egress.clean_envelope(env)
        wire = out.to_json()  # ensure_ascii=False: what an agent or a terminal receives
        wire.encode("utf-8")
        assert raw_unprintable(wire, allowed="\n") == [], wire
        for secret in (CANARY_TOKEN, CANARY_GITHUB, CANARY_AWS, "Winter2026", "PRIVATE KEY"):
            assert secret not in wire
        assert egress.clean_envelope(out) == out  # a cleaned envelope is clean


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(text=_HOSTILE)
def test_property_a_line_is_one_printable_line(text: str) -> None:
    out = egress.clean_line(text)
    assert out.isprintable()
    assert CANARY_TOKEN not in out and CANARY_GITHUB not in out and CANARY_AWS not in out


def test_log_records_pass_the_egress(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        logs.configure("INFO")
        logging.getLogger("ito_training_mcp.test").warning("stage %s\n%s %s", "\x1b[2J\u202e", CANARY_TOKEN, PEM)
        try:
            raise ValueError(CANARY_TOKEN)
        except ValueError:
            logging.getLogger("ito_training_mcp.test").exception("failed")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2, err  # one record, one line: a newline in a message cannot forge another
    assert "⟨U+001B⟩[2J⟨U+202E⟩" in lines[0]
    assert CANARY_TOKEN not in err and "\x1b" not in err and "\u202e" not in err
    assert lines[1].endswith("failed [ValueError]")


def test_progress_messages_pass_the_egress() -> None:
    import anyio

    seen: list[str | None] = []

    async def sink(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async def go() -> None:
        report = egress.clean_progress(sink)
        await report(1, 2, f"run r: running, stage sft\x1b]0;{CANARY_TOKEN}\x07")
        await report(2, 2, f"run r: stage {DATABASE_URL}")
        await report(2, 2, None)

    anyio.run(go)
    assert seen[0] is not None and seen[0].isprintable() and CANARY_TOKEN not in seen[0]
    assert seen[1] is not None and seen[1].startswith("<redacted: looked like a credential")
    assert seen[2] is None


def test_a_character_the_egress_escapes_in_a_manifest_in_another_script_is_escaped(tmp_path: Any) -> None:
    """A no-break space in the description and a private-use character in a label pass gate 2; the egress
    escapes both wherever they appear, in the review and in its text."""
    from ito_training_mcp.gates.config import ManifestSettings
    from ito_training_mcp.gates.manifest.digest import digest_manifest_file
    from ito_training_mcp.service.reviews import review_data

    from .conftest import EXAMPLE_MANIFEST

    document = json.loads(EXAMPLE_MANIFEST.read_bytes())
    document["description"] = "Tiếng Việt\u00a0đánh giá"
    document["data"][0]["decontamination"]["eval_suites"] = ["đánh\ue000giá"]
    path = tmp_path / "manifest.json"
    path.write_bytes(json.dumps(document, ensure_ascii=False).encode())
    digested = digest_manifest_file(str(path), ManifestSettings(max_bytes=1 << 21, roots=None))
    out = egress.clean_envelope(success(review_data(digested), notice="digested", live_api_contacted=False))
    assert out.data is not None
    assert out.data["review"]["description"] == "Tiếng Việt⟨U+00A0⟩đánh giá"
    assert out.data["review"]["data"][0]["decontamination"]["eval_suites"] == ["đánh⟨U+E000⟩giá"]
    assert '"đánh⟨U+E000⟩giá"' in out.data["review_text"] and "\ue000" not in out.to_json()
