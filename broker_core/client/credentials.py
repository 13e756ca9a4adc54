"""ACL credentials a client signs with: from flags, the environment, or a tools.yml like Apache's.

Why one resolver: mqadmin (``--ak/--sk``), the benchmarks and the tests all need the same precedence:
explicit values, then ``ROCKETMQ_ACCESS_KEY``/``ROCKETMQ_SECRET_KEY`` (plus optional
``ROCKETMQ_SECURITY_TOKEN``), then ``$ROCKETMQ_HOME/conf/tools.yml`` (keys ``accessKey`` and
``secretKey``, as Apache mqadmin reads it). Blank keys mean "unsigned", as in Apache's AclUtils.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from broker_core.auth.signer import sign_remoting

ENV_ACCESS_KEY = "ROCKETMQ_ACCESS_KEY"
ENV_SECRET_KEY = "ROCKETMQ_SECRET_KEY"
ENV_SECURITY_TOKEN = "ROCKETMQ_SECURITY_TOKEN"
ENV_ROCKETMQ_HOME = "ROCKETMQ_HOME"


class CredentialsError(ValueError):
    """A tools.yml exists but cannot be used; the text names the file and the field."""


@dataclass(frozen=True)
class SessionCredentials:
    access_key: str
    secret_key: str
    security_token: str | None = None

    def sign(self, ext_fields: Mapping[str, str], body: bytes | None) -> dict[str, str]:
        """extFields plus AccessKey (+ SecurityToken) and Signature (spec D.1)."""
        return sign_remoting(ext_fields, body, self.access_key, self.secret_key, self.security_token)


def tools_yml_path(env: Mapping[str, str] | None = None) -> Path | None:
    env = os.environ if env is None else env
    home = env.get(ENV_ROCKETMQ_HOME)
    return Path(home) / "conf" / "tools.yml" if home else None


def load_tools_yml(path: Path) -> SessionCredentials | None:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CredentialsError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise CredentialsError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise CredentialsError(f"{path}: expected a mapping with accessKey and secretKey")
    ak, sk = data.get("accessKey"), data.get("secretKey")
    if not ak or not sk or not str(ak).strip() or not str(sk).strip():
        return None
    return SessionCredentials(str(ak).strip(), str(sk).strip())


def resolve_credentials(access_key: str | None = None, secret_key: str | None = None,
                        env: Mapping[str, str] | None = None) -> SessionCredentials | None:
    """Flags, then environment, then tools.yml; None when nothing is configured (unsigned requests)."""
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise CredentialsError("--ak and --sk must be given together")
        return SessionCredentials(access_key, secret_key)
    env = os.environ if env is None else env
    ak, sk = env.get(ENV_ACCESS_KEY), env.get(ENV_SECRET_KEY)
    if ak and sk:
        return SessionCredentials(ak, sk, env.get(ENV_SECURITY_TOKEN) or None)
    path = tools_yml_path(env)
    if path is not None and path.is_file():
        return load_tools_yml(path)
    return None
