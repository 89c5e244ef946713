"""What the secret scanner looks for: one table of credential formats, each a literal anchor and a pattern.

Two tiers keep a scan linear and fast on any input (see secret_scan.py). First, one pass over the
text finds which *anchors* occur: short literals every match of a rule contains (`ghp_`, `AKIA`,
`password` case-insensitively). Only the rules whose anchors occur are then searched for, each on
its own; a pattern starts with its anchor where it can, so the engine jumps from one occurrence
of the anchor to the next. A test checks that every example credential contains an anchor of the
rule that finds it.

Every pattern is in the subset of regular-expression syntax that RE2 and Python's `re` read the
same way: no look-around, no back-references, no `\\s \\w \\d \\b` (they differ between the two),
and no reliance on `^`/`$` meaning "start/end of this string". `{m,LONG}` is unbounded for RE2
(a DFA is linear whatever the count) and bounded for Python's backtracking engine, where the
bound is what keeps it linear. Every class other than a trailing end-of-token check excludes NUL
and `"`, so a match never spans two strings when strings are joined with NUL, or in raw JSON text.
A rule that needs "not preceded by a letter or digit" says so in `boundary`, checked on the
character before a match (neither engine has look-behind).

The formats are facts gathered from providers' documentation and from public rule sets such as
gitleaks' default configuration (prefixes, lengths, alphabets); the patterns are our own.
docs/threat-model.md ("Covered formats") lists them; a test keeps that table and this one equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_E = "(?:[^A-Za-z0-9]|$)"  # a token ends here
_VALUE = "[^ \\t\\r\\n,;\"'`\\x00]"  # one character of an assigned value
ALNUM = "A-Za-z0-9"  # `boundary`: the character before a match is not one of these
UPPER_DIGIT = "A-Z0-9"


@dataclass(frozen=True)
class Rule:
    """One credential format.

    `anchors`: literals, at least one of which every match contains (`fold`: compared
    case-insensitively). `boundary`: characters that must not come right before a match.
    `what`: the covered format, for the docs.
    """

    kind: str
    pattern: str
    what: str
    anchors: tuple[str, ...]
    fold: bool = False
    boundary: str = ""


def _rule(kind: str, pattern: str, what: str, *anchors: str, fold: bool = False, boundary: str = "") -> Rule:
    return Rule(kind, pattern, what, anchors or (pattern,), fold, boundary)


def _alt(*words: str, flags: str = "") -> str:
    """One group of alternatives; `flags="i"` makes it case-insensitive."""
    return f"(?{flags}:" + "|".join(words) + ")"


_Trie = dict[str, "_Trie"]


def _none_of(words: tuple[str, ...], chars: str) -> str:
    """A non-empty run of characters of class `chars` that is not one of `words` (compared
    case-insensitively). Built from the words' prefix tree, since neither engine has
    look-around: at each node the run may end (unless the prefix is a word), continue with a
    character no word continues with (then anything), or follow a word one more letter."""
    tree: _Trie = {}
    for word in words:
        node = tree
        for ch in word.lower():
            node = node.setdefault(ch, {})
        node[""] = {}

    def branch(node: _Trie, depth: int) -> str:
        options = [] if depth == 0 or "" in node else [""]
        followed = "".join(ch + ch.upper() for ch in node if ch and ch.isalpha()) + "".join(
            ch for ch in node if ch and not ch.isalpha())
        others = "".join(c for c in _expand(chars) if c not in followed)
        options.append(f"[{_klass(others)}][{chars}]{{0,LONG}}")
        options.extend(f"[{_klass(ch + ch.upper())}]" + branch(child, depth + 1) for ch, child in node.items() if ch)
        return "(?:" + "|".join(options) + ")"

    return branch(tree, 0)


def _expand(klass: str) -> str:
    """The characters of a simple class body such as `A-Za-z0-9._%+-` (ranges and literals)."""
    out: list[str] = []
    i = 0
    while i < len(klass):
        if i + 2 < len(klass) and klass[i + 1] == "-":
            out.extend(chr(c) for c in range(ord(klass[i]), ord(klass[i + 2]) + 1))
            i += 3
        else:
            out.append(klass[i])
            i += 1
    return "".join(dict.fromkeys(out))


def boundary_chars(klass: str) -> str:
    """The characters of a `boundary` class body such as `A-Za-z0-9`."""
    return _expand(klass)


def _klass(chars: str) -> str:
    return "".join("\\" + c if c in "\\]^-[" else c for c in dict.fromkeys(chars))


# ---------------------------------------------------------------------------- words that name a credential

# Lower-case words that name a credential on their own, in key names ("db_password", "apiKey",
# "Passwort") and in assignments ("password: ...", "contraseña=..."). Plural forms are listed.
CREDENTIAL_WORDS: frozenset[str] = frozenset(
    {
        "password", "passwords", "passwd", "passphrase", "passphrases", "pwd", "secret", "secrets", "token",
        "credential", "credentials", "authorization", "cookie", "cookies", "apikey", "apikeys", "privatekey",
        "privatekeys",
        # German, French, Spanish, Portuguese, Russian
        "passwort", "passwörter", "kennwort", "kennwörter", "motdepasse", "contraseña", "contraseñas",
        "contrasena", "contrasenas", "senha", "senhas", "segredo", "пароль", "пароли", "секрет", "токен",
    }
)
# Pairs of consecutive words that name a credential together ("api_key", "client-secret").
CREDENTIAL_PAIRS: frozenset[tuple[str, str]] = frozenset(
    {
        ("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"), ("session", "key"),
        ("client", "secret"), ("auth", "header"), ("signing", "key"), ("account", "key"), ("sas", "url"),
        ("mot", "passe"), ("de", "passe"), ("palavra", "passe"), ("clave", "api"), ("chave", "api"),
        ("api", "schlüssel"),
    }
)
# Scripts written without spaces between words: a key name containing one of these names a credential.
UNSPACED_CREDENTIAL_WORDS: tuple[str, ...] = (
    "密码", "密碼", "口令", "密钥", "密鑰", "令牌", "パスワード", "暗証番号", "トークン", "秘密鍵", "비밀번호", "토큰",
)

# Case-insensitive stems, at least one of which every credential key name contains (used to decide
# cheaply, over a whole JSON text, whether any key could name a credential).
KEY_NAME_STEMS: tuple[str, ...] = (
    "pass", "pwd", "secret", "token", "credential", "authoriz", "cookie", "key", "header", "url", "kennw",
    "contrase", "senha", "segredo", "schlüssel", "clave", "chave", "парол", "секрет", "токен",
    *UNSPACED_CREDENTIAL_WORDS,
)

# Anchors that no finding continues with certain characters: an occurrence of one of these, followed in
# the text the scanner reads by one of its stop characters (a character class), takes part in no
# match of a rule it anchors and in no credential key name. The searches for places where text in
# another form could hold an anchor (decomposed_anchors.py) pass over such occurrences, so that a
# mebibyte of "tokenizer" is not a mebibyte of places. "token": every rule it anchors wants `s`, a
# separator, a quote, a blank, `:` or `=` after it, and a key name wants it to end the key (the
# `token` of "hf_token"; see _LAST_WORD_ONLY); "tokenizer", "TOKEN2" and "tokenValue" go on with a
# stop. A test checks every rule and key name against this table, and this table against them.
ANCHOR_STOPS: dict[str, str] = {"token": "A-Za-rt-z0-9"}

# Anchors that, in a string that is a JSON value and no key, no finding continues with a letter or
# digit (other than `s`), nor with blanks and then a letter or digit: every rule each anchors wants
# right after it `s`, a separator, a quote, or blanks and then `:` or `=`. In a key the credential
# key name wants less (`token` then a blank ends the word), so the stops hold for values alone. The
# look at a JSON text (raw_look.py) passes over such occurrences in a value, so that a mebibyte of
# labels saying "token budget" or "パスワードを忘れた" is not a mebibyte of places. The letters are
# those NFKC leaves as they are (decomposed_anchors.value_letters). A test checks this table against
# every rule.
VALUE_STOPS: frozenset[str] = frozenset({"token", *UNSPACED_CREDENTIAL_WORDS})

# Anchors that a `:` comes before, in the same string, in every match of every rule they anchor: the
# `://` of a URL before its userinfo `@` or its query's `?`, `&` and `;`; a user's `:` and three
# characters or more (a password) before `@`, and then a host. The look at a JSON text takes an
# occurrence of one for a place only where its string holds these around it (anchor_tails.after_colon),
# so that a mebibyte of labels saying "a@b", "x:y@z", "x:yyy@z," or "why?" is not a mebibyte of places.
# A test checks this against matches generated from the rules.
AFTER_COLON: frozenset[str] = frozenset({"@", "?", "&", ";"})

# Credential words as they appear in running text before `:` or `=`, one rule per group so that each
# pattern starts with its own literal (and only the groups whose anchor occurs are searched). A word
# may carry a suffix after a separator ("password_file", "secret-key") but not after a letter, so
# "passwordless: yes" and "secretary: Jo" are not assignments.
_ASSIGNABLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pass(?:word|wd|phrase|wort)", ("pass",)),
    ("secret", ("secret",)),
    ("api[ _.-]?key", ("api",)),
    ("access[_.-]?(?:key|token)", ("access",)),
    ("private[_.-]?key", ("private",)),
    ("auth[_.-]?token", ("auth",)),
    ("(?:refresh|id)[_.-]?token", ("token",)),
    ("client[_.-]?secret", ("client",)),
    ("credentials?", ("credential",)),
    ("kennwort", ("kennwort",)),
    ("mot[ _-]de[ _-]passe", ("mot",)),
    ("contrase(?:ñ|n)a", ("contrase",)),
    ("senha", ("senha",)),
    ("palavra[ _-]passe", ("palavra",)),
    ("(?:пароль|секрет|токен)", ("пароль", "секрет", "токен")),
    ("(?:" + "|".join(UNSPACED_CREDENTIAL_WORDS) + ")", UNSPACED_CREDENTIAL_WORDS),
)
_SUFFIX = "(?:s|(?:[_.-][A-Za-z0-9_.-]{0,LONG}))?"
_ASSIGN = "[ \\t]{0,8}(?:[:=]|=>|:=)[ \\t]{0,8}[\"'`]?"

# Words that stand before `:` and an e-mail address without being a user name ("mailto:a@b.c",
# "owner:ml-team@acme.com"): never read as `user:password@host`.
_LABELS = ("mailto", "sip", "sips", "tel", "xmpp", "im", "acct", "email", "e-mail", "mail", "contact", "owner",
           "author", "maintainer", "from", "to", "cc", "bcc", "by", "reply-to", "sender", "support", "team")

# ---------------------------------------------------------------------------- the formats

_R = _rule
RULES: tuple[Rule, ...] = (
    # Keys and key files
    _R("private_key", "-----BEGIN[ A-Z0-9_-]{0,64}PRIVATE KEY", "PEM private keys of any type (RSA, EC, DSA, "
       "OpenSSH, PKCS#8, encrypted, PGP key blocks), also inside a GCP service-account JSON `private_key`",
       "-----BEGIN"),
    _R("private_key", "PuTTY-User-Key-File-[0-9]", "PuTTY private key files", "PuTTY-User-Key-File-"),
    _R("private_key", "LS0tLS1CRUdJTi[A-Za-z0-9+/]{0,64}(?:UFJJVkFURSBLRV|BSSVZBVEUgS0VZ|QUklWQVRFIEtFW)",
       "a base64-encoded PEM private key (kubeconfig `client-key-data`, Kubernetes secrets)", "LS0tLS1CRUdJTi"),
    _R("age_secret_key", "AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "age encryption secret keys",
       "AGE-SECRET-KEY-1"),
    # Cloud providers
    _R("aws_access_key_id",
       _alt("A3T[A-Z0-9]", "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA",
            "ASCA") + "[A-Z0-9]{16}(?:[^A-Z0-9]|$)",
       "AWS access key ids, every prefix (AKIA, ASIA, ABIA, ACCA, AGPA, AIDA, AIPA, ANPA, ANVA, AROA, APKA, ASCA, "
       "A3T)", "A3T", "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA", "ASCA",
       boundary=UPPER_DIGIT),
    _R("aws_secret_access_key",
       "(?i:secret)[_.-]?(?i:access)[_.-]?(?i:key)[\"']?" + _ASSIGN + "[A-Za-z0-9/+=]{40}",
       "an AWS secret access key assigned to its usual name (`aws_secret_access_key = ...`, `SecretAccessKey:`)",
       "secret", fold=True),
    _R("aws_bedrock_api_key", "ABSK[A-Za-z0-9+/]{100}", "Amazon Bedrock API keys (`ABSK`)", "ABSK", boundary=ALNUM),
    _R("google_api_key", "AIza[0-9A-Za-z_-]{35}", "Google API keys (`AIza`)", "AIza", boundary=ALNUM),
    _R("google_oauth_token", "ya29\\.[0-9A-Za-z_-]{20}", "Google OAuth access tokens (`ya29.`)", "ya29.",
       boundary=ALNUM),
    _R("google_oauth_client_secret", "GOCSPX-[0-9A-Za-z_-]{28}", "Google OAuth client secrets (`GOCSPX-`)",
       "GOCSPX-"),
    _R("azure_account_key", "(?i:accountkey|sharedaccesskey)[ \\t]{0,8}=[ \\t]{0,8}[A-Za-z0-9+/=]{16}",
       "Azure storage and Service Bus connection strings (`AccountKey=`, `SharedAccessKey=`)", "accountkey",
       "sharedaccesskey", fold=True),
    _R("azure_client_secret", "[0-9]Q~[A-Za-z0-9_~.-]{31}", "Azure AD (Entra) client secrets (`...8Q~...`)", "Q~"),
    _R("alibaba_access_key_id", "LTAI[A-Za-z0-9]{20}" + _E, "Alibaba Cloud access key ids (`LTAI`)", "LTAI",
       boundary=ALNUM),
    _R("digitalocean_token", "do[opr]_v1_[a-f0-9]{64}", "DigitalOcean tokens (`dop_v1_`, `doo_v1_`, `dor_v1_`)",
       "_v1_"),
    _R("heroku_api_key", "HRKU-AA[0-9A-Za-z_-]{58}", "Heroku API keys (`HRKU-AA`)", "HRKU-AA"),
    _R("heroku_api_key",
       "(?i:heroku)[A-Za-z0-9_ .-]{0,LONG}" + _ASSIGN
       + "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
       "a Heroku API key (UUID) assigned to a Heroku name", "heroku", fold=True),
    _R("databricks_token", "dapi[a-f0-9]{32}", "Databricks personal access tokens (`dapi`)", "dapi", boundary=ALNUM),
    _R("cloudflare_origin_ca_key", "v1\\.0-[a-f0-9]{24}-[a-f0-9]{146}", "Cloudflare Origin CA keys", "v1.0-"),
    _R("flyio_token", "f(?:o1_[A-Za-z0-9_-]{43}|m[12][ar]?_[A-Za-z0-9+/]{64})", "Fly.io tokens", "fo1_", "fm1",
       "fm2", boundary=ALNUM),
    _R("vault_token", "hv[sbr]\\.[A-Za-z0-9_-]{24}", "HashiCorp Vault tokens (`hvs.`, `hvb.`, `hvr.`)", "hvs.",
       "hvb.", "hvr.", boundary=ALNUM),
    _R("terraform_cloud_token", "\\.atlasv1\\.[A-Za-z0-9_=-]{60}",
       "Terraform Cloud / Enterprise API tokens (`.atlasv1.`)", ".atlasv1."),
    _R("pulumi_token", "pul-[a-f0-9]{40}", "Pulumi access tokens (`pul-`)", "pul-", boundary=ALNUM),
    _R("doppler_token", "dp\\.(?:pt|st|sa|ct|scim|audit)\\.[A-Za-z0-9]{40}", "Doppler tokens (`dp.pt.` ...)",
       "dp.", boundary=ALNUM),
    _R("onepassword_token", "ops_eyJ[A-Za-z0-9+/=_-]{100}", "1Password service-account tokens (`ops_`)",
       "ops_eyJ"),
    _R("onepassword_secret_key", "A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}",
       "1Password account secret keys (`A3-`)", "A3-", boundary=ALNUM),
    # Source hosting and package registries
    _R("github_token", "gh[pousr]_[A-Za-z0-9]{30}",
       "GitHub tokens: personal (`ghp_`), OAuth (`gho_`), user-to-server (`ghu_`), server-to-server (`ghs_`), "
       "refresh (`ghr_`)", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", boundary=ALNUM),
    _R("github_token", "github_pat_[A-Za-z0-9_]{20}", "GitHub fine-grained personal access tokens (`github_pat_`)",
       "github_pat_"),
    _R("gitlab_token",
       "gl" + _alt("pat", "dt", "rt", "ptt", "ft", "imt", "agent", "oas", "soat", "ffct", "cbt") + "-[0-9A-Za-z_-]{20}",
       "GitLab tokens: personal (`glpat-`), deploy (`gldt-`), runner (`glrt-`), pipeline trigger (`glptt-`), feed, "
       "incoming mail, agent, OAuth secret, SCIM, feature-flag and CI job tokens",
       "glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glimt-", "glagent-", "gloas-", "glsoat-", "glffct-", "glcbt-",
       boundary=ALNUM),
    _R("gitlab_token", "GR1348941[0-9A-Za-z_-]{20}", "GitLab runner registration tokens (`GR1348941`)", "GR1348941"),
    _R("gitlab_token", "_gitlab_session=[0-9a-z]{32}", "GitLab session cookies", "_gitlab_session="),
    _R("npm_token", "npm_[A-Za-z0-9]{36}", "npm access tokens (`npm_`)", "npm_", boundary=ALNUM),
    _R("pypi_token", "pypi-AgE[A-Za-z0-9_-]{40}", "PyPI and TestPyPI upload tokens (`pypi-AgE...`)", "pypi-AgE"),
    _R("docker_hub_token", "dckr_(?:pat|oat)_[A-Za-z0-9_-]{20}", "Docker Hub access tokens (`dckr_pat_`)", "dckr_"),
    _R("rubygems_token", "rubygems_[a-f0-9]{48}", "RubyGems API keys (`rubygems_`)", "rubygems_"),
    _R("artifactory_token", "AKCp[A-Za-z0-9]{69}", "JFrog Artifactory API keys (`AKCp`)", "AKCp", boundary=ALNUM),
    # AI and ML providers
    _R("openai_style_key", "sk-(?:proj-|svcacct-|admin-)?[A-Za-z_-]{0,47}[0-9][A-Za-z0-9_-]{12}",
       "OpenAI keys (`sk-`, `sk-proj-`, `sk-svcacct-`, `sk-admin-`) and other `sk-` keys of that shape", "sk-",
       boundary=ALNUM),
    _R("anthropic_api_key", "sk-ant-(?:api|admin|oat|ort)[0-9]{2}-[A-Za-z0-9_-]{20}",
       "Anthropic API and admin keys (`sk-ant-api03-`, `sk-ant-admin01-`)", "sk-ant-", boundary=ALNUM),
    _R("huggingface_token", "hf_[A-Za-z0-9]{30}", "Hugging Face user access tokens (`hf_`)", "hf_", boundary=ALNUM),
    _R("huggingface_token", "api_org_[A-Za-z0-9]{30}", "Hugging Face organisation tokens (`api_org_`)", "api_org_",
       boundary=ALNUM),
    _R("groq_api_key", "gsk_[A-Za-z0-9]{48}", "Groq API keys (`gsk_`)", "gsk_", boundary=ALNUM),
    _R("xai_api_key", "xai-[A-Za-z0-9]{70}", "xAI API keys (`xai-`)", "xai-", boundary=ALNUM),
    _R("replicate_token", "r8_[A-Za-z0-9]{37}", "Replicate API tokens (`r8_`)", "r8_", boundary=ALNUM),
    _R("perplexity_api_key", "pplx-[A-Za-z0-9]{48}", "Perplexity API keys (`pplx-`)", "pplx-", boundary=ALNUM),
    _R("langsmith_api_key", "lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}", "LangSmith API keys (`lsv2_`)", "lsv2_"),
    _R("pinecone_api_key", "pcsk_[A-Za-z0-9_]{40}", "Pinecone API keys (`pcsk_`)", "pcsk_", boundary=ALNUM),
    # Chat, mail, payments, observability, SaaS
    _R("slack_token", "xox[abposre]-[A-Za-z0-9-]{10}", "Slack bot, user, app, configuration and legacy tokens "
       "(`xoxb-`, `xoxp-`, `xoxa-`, `xoxe-` ...)", "xox", boundary=ALNUM),
    _R("slack_token", "xapp-[0-9]-[A-Z0-9]{4}", "Slack app-level tokens (`xapp-`)", "xapp-", boundary=ALNUM),
    _R("slack_webhook", "hooks\\.slack\\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16}",
       "Slack incoming webhooks and workflow triggers", "hooks.slack.com"),
    _R("discord_bot_token",
       "(?i:discord)[^\\x00\"]{0,LONG}[MNO][A-Za-z0-9_-]{23,25}\\.[A-Za-z0-9_-]{6}\\.[A-Za-z0-9_-]{27}",
       "Discord bot tokens near the word Discord", "discord", fold=True),
    _R("discord_webhook", "discord(?:app)?\\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60}", "Discord webhooks",
       "/api/webhooks/"),
    _R("telegram_bot_token", "[0-9]:AA[A-Za-z0-9_-]{33}", "Telegram bot tokens (`123456789:AA...`)", ":AA"),
    _R("teams_webhook", "\\.webhook\\.office\\.com/webhookb2/[A-Za-z0-9@/-]{40}", "Microsoft Teams webhooks",
       ".webhook.office.com/"),
    _R("stripe_key", "[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10}",
       "Stripe secret and restricted keys (`sk_live_`, `rk_test_` ...)", "k_live_", "k_test_", "k_prod_",
       boundary=ALNUM),
    _R("stripe_key", "whsec_[A-Za-z0-9]{24}", "Stripe webhook signing secrets (`whsec_`)", "whsec_", boundary=ALNUM),
    _R("square_token", "(?:EAAA[A-Za-z0-9_-]{60}|sq0(?:atp|csp)-[A-Za-z0-9_-]{22})",
       "Square access tokens and OAuth secrets", "EAAA", "sq0atp-", "sq0csp-", boundary=ALNUM),
    _R("braintree_token", "access_token\\$(?:production|sandbox)\\$[0-9a-z]{16}\\$[0-9a-f]{32}",
       "PayPal Braintree access tokens", "access_token$"),
    _R("shopify_token", "shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", "Shopify access tokens and shared secrets", "shpat_",
       "shpca_", "shppa_", "shpss_"),
    _R("twilio_api_key", "SK[0-9a-f]{32}" + _E, "Twilio API keys (`SK` and 32 hex digits)", "SK", boundary=ALNUM),
    _R("sendgrid_api_key", "SG\\.[A-Za-z0-9_-]{16,32}\\.[A-Za-z0-9_-]{16}", "SendGrid API keys (`SG.`)", "SG.",
       boundary=ALNUM),
    _R("sendinblue_api_key", "xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", "Brevo (Sendinblue) API keys", "xkeysib-"),
    _R("mailgun_api_key", "(?i:mailgun)[^\\x00\"]{0,LONG}key-[0-9a-f]{32}",
       "Mailgun API keys (`key-`) near the word Mailgun", "mailgun", fold=True),
    _R("mailchimp_api_key", "(?i:mailchimp|mc[_-]?api[_-]?key)[^\\x00\"]{0,LONG}[0-9a-f]{32}-us[0-9]{1,2}",
       "Mailchimp API keys (`...-us12`) near the word Mailchimp", "mailchimp", "mcapi", "mc_api", "mc-api",
       fold=True),
    _R("datadog_api_key",
       "(?i:datadog|dd[_-]api[_-]key|dd[_-]app(?:lication)?[_-]key)[A-Za-z0-9_ .-]{0,LONG}" + _ASSIGN
       + "[a-f0-9]{32}", "Datadog API and application keys assigned to a Datadog name", "datadog", "dd_ap",
       "dd-ap", fold=True),
    _R("new_relic_key", "NR(?:AK|II|JS)-[A-Za-z0-9]{19}", "New Relic user, insert and browser keys", "NRAK-",
       "NRII-", "NRJS-"),
    _R("sentry_token", "sntry[su]_[A-Za-z0-9+/=_]{40}", "Sentry organisation and user auth tokens", "sntrys_",
       "sntryu_"),
    _R("grafana_token", "(?:glc_[A-Za-z0-9+/]{32}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|eyJrIjoi[A-Za-z0-9]{50})",
       "Grafana Cloud, service-account and legacy API keys", "glc_", "glsa_", "eyJrIjoi", boundary=ALNUM),
    _R("dynatrace_token", "dt0c01\\.[A-Za-z0-9]{24}\\.[A-Za-z0-9]{64}", "Dynatrace API tokens", "dt0c01."),
    _R("linear_api_key", "lin_(?:api|oauth)_[A-Za-z0-9]{40}", "Linear API keys (`lin_api_`)", "lin_api_",
       "lin_oauth_"),
    _R("atlassian_api_token", "AT[AC]TT3[A-Za-z0-9_=-]{20}", "Atlassian (Jira, Confluence) API tokens", "ATATT3",
       "ATCTT3"),
    _R("notion_token", "(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})", "Notion integration tokens",
       "ntn_", "secret_", boundary=ALNUM),
    _R("dropbox_token", "sl\\.(?:u\\.)?[A-Za-z0-9_-]{100}", "Dropbox access tokens (`sl.`)", "sl.",
       boundary=ALNUM),
    _R("postman_api_key", "PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}", "Postman API keys (`PMAK-`)", "PMAK-"),
    _R("planetscale_token", "pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32}", "PlanetScale tokens and passwords",
       "pscale_"),
    _R("prefect_api_key", "pnu_[A-Za-z0-9]{36}", "Prefect API keys (`pnu_`)", "pnu_", boundary=ALNUM),
    _R("easypost_api_key", "EZ[AT]K[A-Za-z0-9]{54}", "EasyPost API keys", "EZAK", "EZTK", boundary=ALNUM),
    _R("shippo_token", "shippo_(?:live|test)_[a-fA-F0-9]{40}", "Shippo API tokens", "shippo_"),
    # Generic shapes
    _R("jwt", "eyJ[A-Za-z0-9_-]{8,LONG}\\.eyJ[A-Za-z0-9_-]{8,LONG}\\.[A-Za-z0-9_-]{8}",
       "JSON Web Tokens (header, payload and signature)", "eyJ"),
    _R("bearer_token",
       "(?i:bearer)[ \\t]{1,8}(?:[A-Za-z._~+/=-]{0,47}[0-9][A-Za-z0-9._~+/=-]{7}"
       "|[A-Za-z0-9._~+/=-]{7}[A-Za-z._~+/=-]{0,40}[0-9])",
       "`Bearer <token>` where the token has a digit (so 'the bearer of news' is not one)", "bearer", fold=True),
    _R("authorization_header",
       "(?i:authorization)[\"']?[ \\t]{0,8}[:=][ \\t]{0,8}[\"']?"
       "(?:(?i:bearer|token|basic|digest|apikey|api-key|sso-key|otp)[ \\t]{1,8})?" + _VALUE + "{6}",
       "an `Authorization:` or `Proxy-Authorization:` header with any scheme (`Token`, `Bearer`, `Basic` ...) "
       "and a value", "authorization", fold=True),
    _R("basic_auth",
       "(?i:basic)[ \\t]{1,8}(?:[A-Za-z0-9+/]{4}){0,LONG}"
       "(?:O[g-v][A-Za-z0-9+/]{2}|[A-Za-z0-9+/][DTjz][o-r][A-Za-z0-9+/]|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]6)",
       "`Basic <base64>` whose decoded text contains `user:password`", "basic", fold=True),
    _R("cookie_header", "(?i:cookie)[ \\t]{0,8}:[ \\t]{0,8}[A-Za-z0-9_.-]{1,64}=[^ \\t;\"\\x00]{8}",
       "`Cookie:` and `Set-Cookie:` headers with a value", "cookie", fold=True),
    _R("url_userinfo", "://[^/?#@ \\t\\r\\n\"\\x00]{1,LONG}@",
       "a URL with userinfo (`scheme://user:password@host`, also a user alone)", "@"),
    _R("userinfo_without_scheme",
       _none_of(_LABELS, "A-Za-z0-9._%+-") + ":[^ \\t\\r\\n/@:\"'\\x00]{3,LONG}@"
       "(?:localhost|[A-Za-z0-9-]{1,LONG}\\.[A-Za-z0-9-]|[A-Za-z0-9-]{1,LONG}:[0-9]{1,5}(?:[^A-Za-z0-9]|$))",
       "`user:password@host` without a scheme (not `git@host:org/repo`, not an e-mail address after "
       "`mailto:`, `owner:` and similar labels)", "@", boundary="A-Za-z0-9._%+-"),
    _R("signed_url",
       "://[^ \\t\\r\\n\"<>\\x00]{0,LONG}[?&;]"
       + _alt("x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature",
              "x-goog-credential", "signature", "sig", "se", "sp", "sv", "skoid", "token", "access_token",
              "id_token", "refresh_token", "api_key", "apikey", "key", "password", "passwd", "pwd", "secret",
              "client_secret", "auth", "authorization", "policy", "key-pair-id", "googleaccessid", "expires",
              flags="i")
       + "(?:[=&#;]|[ \\t\"\\x00]|$)",
       "a URL whose query carries a signature or a credential (S3 and GCS pre-signed URLs, Azure SAS, CloudFront, "
       "`?token=`, `?api_key=`, `?password=` ...)", "?", "&", ";"),
    *(_R("credential_assignment", f"(?i:{words})" + _SUFFIX + "[\"']?" + _ASSIGN + _VALUE + "{6}",
         "a credential name assigned a value in text (`password=...`, `api_key: ...`, `client_secret = ...`, "
         "`Passwort:`, `Kennwort=`, `mot de passe :`, `contraseña=`, `senha:`, `palavra-passe:`, `пароль:`, "
         "`密码：`, `パスワード=`)", *anchors, fold=True) for words, anchors in _ASSIGNABLE),
    _R("credential_assignment", "(?i:token|pwd)" + _ASSIGN + _VALUE + "{8}",
       "`token: ...` and `pwd=...` (the bare words, so `max_tokens: 4096` is not one)", "token", "pwd", fold=True,
       boundary="A-Za-z"),
)


# ---------------------------------------------------------------------------- invisible characters

# Removed before matching: NUL, the format characters (Unicode category Cf: soft hyphen, zero-width
# space and joiners, word joiner, BOM, bidi controls, tag characters ...; a test keeps this a superset
# of Cf) and invisible characters of other categories (combining grapheme joiner, Hangul fillers as
# NFKC leaves them, Khmer inherent vowels, Mongolian and other variation selectors).
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00, 0x00), (0xAD, 0xAD), (0x34F, 0x34F), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F),
    (0x890, 0x891), (0x8E2, 0x8E2), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F),
    (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F), (0xE0100, 0xE01EF),
)


def invisible_class(re2: bool, *, nul: bool = True) -> str:
    """The invisible characters as a character class (`nul=False`: all but NUL)."""
    def char(code: int) -> str:
        return f"\\x{{{code:x}}}" if re2 else f"\\U{code:08x}"

    ranges = INVISIBLE_RANGES if nul else [(a, b) for a, b in INVISIBLE_RANGES if (a, b) != (0, 0)]
    return "[" + "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in ranges) + "]"


# ---------------------------------------------------------------------------- key names

_LETTERS = "A-Za-z0-9\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"  # Latin, Greek and Cyrillic letters, digits
_SEP = "[^A-Za-z0-9\"\\x00]{1,8}"  # between two words of a key name: `_`, `-`, `.`, a space ...


def _word_forms(word: str, plural: bool = False) -> list[tuple[str, str, str]]:
    """(before, form, after) for a word written lower-case, Title-case or UPPER-case in a key name.

    The boundaries follow how key names split into words (snake, kebab, dotted, camel): a
    lower-case word starts after a non-alphanumeric character and ends before anything but a
    lower-case letter or digit ("token_budget" and "hfToken" have the word, "tokens" and
    "tokenizer" do not); a Title-case word may follow anything ("hfToken", "HFToken"); an
    UPPER-case word must not continue an upper-case run and ends before a non-letter or the start
    of a Title-case word ("HF_TOKEN", "TOKENValue").
    """
    s = "(?:s)?" if plural else ""
    s_upper = "(?:S)?" if plural else ""
    escaped = [re.escape(w) for w in (word, word[:1].upper() + word[1:], word.upper())]
    return [
        ("(?:^|[^A-Za-z0-9])", escaped[0] + s, "(?:[^a-z0-9]|$)"),
        ("", escaped[1] + s, "(?:[^a-z0-9]|$)"),
        ("(?:^|[^A-Z])", escaped[2] + s_upper, "(?:[^A-Za-z]|$|[A-Z][a-z])"),
    ]


# "token" is also the unit of text a model reads: it names a credential only as the last word of a key
# ("hf_token", "accessToken"), not in "token_budget" or "TOKEN_LIMIT".
_LAST_WORD_ONLY = frozenset({"token"})
_KEY_END = "(?:[^A-Za-z0-9_.-]|$)"


def _key_name_pattern() -> str:
    options: list[str] = []
    for word in sorted(CREDENTIAL_WORDS):
        if word in _LAST_WORD_ONLY:
            options.extend(before + form + _KEY_END for before, form, _ in _word_forms(word))
        elif word.isascii():
            options.extend(before + form + after for before, form, after in _word_forms(word))
        else:  # Latin with diacritics, Cyrillic: any case, between non-letters
            options.append(f"(?:^|[^{_LETTERS}])(?i:{re.escape(word)})(?:[^{_LETTERS}]|$)")
    for first, second in sorted(CREDENTIAL_PAIRS):
        plural = second in ("key", "secret", "header")
        for before, form1, _ in _word_forms(first):
            for _, form2, after in _word_forms(second, plural):
                options.append(before + form1 + _SEP + form2 + after)
        # camelCase: the second word Title-case right after the first ("apiKey", "APIKey")
        title = _word_forms(second, plural)[1]
        for before, form1, _ in _word_forms(first):
            options.append(before + form1 + title[1] + title[2])
    options.extend(re.escape(word) for word in UNSPACED_CREDENTIAL_WORDS)
    return "(?:" + "|".join(options) + ")"


# A key name that names a credential (the whole key is the text searched).
KEY_NAME = _key_name_pattern()

_LONG = re.compile(r"\{([0-9]+),LONG\}")
PYTHON_BOUND = 4096


def for_re2(pattern: str) -> str:
    """`{m,LONG}` unbounded: RE2 is linear whatever the count, and a DFA stays small without counters."""
    return _LONG.sub(lambda m: "{" + m.group(1) + ",}", pattern)


def for_python(pattern: str) -> str:
    """`{m,LONG}` bounded: a backtracking engine stays linear only with bounded repetition."""
    return _LONG.sub(lambda m: "{" + m.group(1) + f",{PYTHON_BOUND}}}", pattern)
