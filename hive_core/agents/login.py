"""Whether a claude desk will find a login when it starts, told without starting it.

`claude_login(env, places, files, platform, folder)` is the decision: given the
environment a desk starts with (the office's plus the roster's `env`) and the contents
of the files Claude Code reads at start-up (`claude_places(env)` names them), what it
will authenticate with, and whether it starts without asking the person anything.
`LoginReader` reads those files (re-read only when their stat changes) and decides; it
never runs claude and never touches the network.

What Claude Code 2.1.197 (scripts/claude-code-version) does, read from its bundle and
its authentication page (code.claude.com/docs/en/authentication, "Authentication
precedence", "Credential management"):
- It takes the first of: a cloud provider (CLAUDE_CODE_USE_BEDROCK, _VERTEX, _FOUNDRY),
  ANTHROPIC_AUTH_TOKEN, ANTHROPIC_API_KEY, an `apiKeyHelper` setting,
  CLAUDE_CODE_OAUTH_TOKEN, then the login `/login` stored: on Linux
  `<config dir>/.credentials.json` (`claudeAiOauth.accessToken`), on macOS the
  Keychain; a Console login's key is kept as `primaryApiKey` in the global config.
- The config dir is $CLAUDE_CONFIG_DIR, else ~/.claude; the credentials live in
  $CLAUDE_SECURESTORAGE_CONFIG_DIR when that is set. The global config is
  `<config dir>/.config.json` if that exists, else `.claude.json` in $CLAUDE_CONFIG_DIR,
  else in $HOME.
- An interactive session uses ANTHROPIC_API_KEY only once the person approved it: the
  global config's `customApiKeyResponses.approved` holds the key's last 20 characters;
  a new key opens the "Detected a custom API key" question at every start until it is
  answered (a rejected one is passed over).
- The first-run screens (theme, login, the key question) show while the global config
  lacks `hasCompletedOnboarding`. The trust dialog then asks unless `projects[K]
  .hasTrustDialogAccepted` holds for K the folder's git root (a worktree's: its main
  checkout's) or the folder or one above it.
- Settings' `env` (user settings `<config dir>/settings.json`, managed settings
  /etc/claude-code/managed-settings.json) is applied over the environment.

So every claude desk of an office shares one login and one answer to those questions
(the same $HOME or $CLAUDE_CONFIG_DIR): what the first desk is told, the others read.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import msgspec

from hive_core.fsio import UnsafeFile, read_regular
from hive_core.paths import DEFAULT_DEMO_HOME, HivePaths, demo_home
from hive_core.schema import AgentSpec

_T = TypeVar("_T")

# How the CLI abbreviates an API key before it looks it up in `approved`.
APPROVED_KEY_SUFFIX = 20
CLOUD_FLAGS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
# The environment variables the decision reads (the rest cannot change it).
READ_VARS = frozenset(
    {
        *CLOUD_FLAGS,
        "HOME",
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_SECURESTORAGE_CONFIG_DIR",
        "CLAUDE_CODE_SANDBOXED",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
    }
)
ANSWERS_KEPT = 256
# Bigger files than this are not Claude Code's (a .claude.json with a long history is
# a few MB): read as absent rather than parsed on the office's loop.
READ_MAX = 32 * 1024 * 1024


def first_desk(agents: Iterable[AgentSpec], manager: str, provider: str) -> AgentSpec | None:
    """The desk of `provider` whose pane asks for the login (and the first-run questions)
    for all of them: the first local desk of it the office starts (the manager first,
    then roster order)."""
    order = sorted(agents, key=lambda a: a.id != manager)
    return next(
        (
            a
            for a in order
            if a.provider == provider and a.host is None and not a.archived and not a.send_only
        ),
        None,
    )


def first_claude(agents: Iterable[AgentSpec], manager: str) -> AgentSpec | None:
    return first_desk(agents, manager, "claude")


def approved_key_form(api_key: str) -> str:
    return api_key[-APPROVED_KEY_SUFFIX:]


@dataclass(frozen=True)
class ClaudePlaces:
    """The files a claude process started with `env` reads for its login."""

    config: Path  # the global config: onboarding done, approved keys, primaryApiKey
    credentials: Path  # the plaintext credential store (Linux, Windows)
    settings: tuple[Path, ...]  # user and managed settings: apiKeyHelper, env


def claude_places(env: Mapping[str, str], legacy_config_exists: bool = False) -> ClaudePlaces:
    home = Path(env.get("HOME") or Path.home())
    config_dir = (
        Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    )
    secure = env.get("CLAUDE_SECURESTORAGE_CONFIG_DIR")
    store = (Path(secure) if secure else home / ".claude") if secure is not None else config_dir
    if legacy_config_exists:
        config = config_dir / ".config.json"
    else:
        config = (Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home) / (
            ".claude.json"
        )
    return ClaudePlaces(
        config=config,
        credentials=store / ".credentials.json",
        settings=(config_dir / "settings.json", MANAGED_SETTINGS),
    )


class _KeyAnswers(msgspec.Struct):
    approved: list[str] = []
    rejected: list[str] = []


class _Project(msgspec.Struct):
    hasTrustDialogAccepted: bool = False


class _Config(msgspec.Struct):
    hasCompletedOnboarding: bool = False
    projects: dict[str, _Project] = {}
    customApiKeyResponses: _KeyAnswers = msgspec.field(default_factory=_KeyAnswers)
    primaryApiKey: str | None = None
    oauthAccount: dict[str, object] | None = None


class _Oauth(msgspec.Struct):
    accessToken: str | None = None


class _Credentials(msgspec.Struct):
    claudeAiOauth: _Oauth | None = None


class _Settings(msgspec.Struct):
    apiKeyHelper: str | None = None
    env: dict[str, str] = {}


def _decode(raw: bytes | None, kind: type[_T]) -> _T | None:
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw, type=kind)
    except (msgspec.DecodeError, RecursionError):
        return None  # a file Claude Code itself could not read either


@dataclass(frozen=True)
class ClaudeLogin:
    """What a claude desk will authenticate with (None: nothing: it would ask for a
    login), and whether it starts without a question (login usable, first run done)."""

    source: str | None
    ready: bool
    # What the first desk to start will ask once (the others then read the answer).
    asks: str | None = None


@dataclass(frozen=True)
class Folder:
    """Where a desk starts, as Claude Code's trust question knows it: `key` is the
    folder it records the answer under (a git worktree's main checkout, else the git
    root, else the folder), `path` the folder itself (an answer for a folder above it
    counts too)."""

    key: Path
    path: Path


def claude_login(
    env: Mapping[str, str],
    places: ClaudePlaces,
    files: Mapping[Path, bytes | None],
    platform: str = sys.platform,
    folder: Folder | None = None,
) -> ClaudeLogin:
    """`places`: claude_places(env); `files`: their contents (None: absent); `folder`:
    where the desk starts, when its trust question counts too."""
    settings = [_decode(files.get(p), _Settings) for p in places.settings]
    # Settings' env applies over the process's, managed settings last.
    merged = dict(env)
    for found in settings:
        if found is not None:
            merged.update(found.env)
    config = _decode(files.get(places.config), _Config) or _Config()
    source, asks = _source(merged, config, settings, files.get(places.credentials), platform)
    if source is None:
        return ClaudeLogin(source=None, ready=False, asks="a login")
    if asks is None and not config.hasCompletedOnboarding:
        asks = "its first-run questions"
    if asks is None and folder is not None and not _trusted(merged, config, folder):
        asks = f"whether to trust {folder.key}"
    return ClaudeLogin(source=source, ready=asks is None, asks=asks)


def _truthy(value: str | None) -> bool:
    """How Claude Code reads a flag variable."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _trusted(env: Mapping[str, str], config: _Config, folder: Folder) -> bool:
    if _truthy(env.get("CLAUDE_CODE_SANDBOXED")):
        return True
    answered = {k for k, p in config.projects.items() if p.hasTrustDialogAccepted}
    return str(folder.key) in answered or any(
        str(p) in answered for p in (folder.path, *folder.path.parents)
    )


def _git_file(path: Path) -> str:
    return read_regular(path, 64 * 1024, follow=True).decode().strip()


def desk_folder(cwd: Path) -> Folder:
    """The Folder of `cwd`, read from its git files the way Claude Code does (no git
    run): a worktree's `.git` file leads to its main checkout."""
    path = Path(os.path.realpath(cwd))
    root = next((p for p in (path, *path.parents) if (p / ".git").exists()), None)
    if root is None:
        return Folder(key=path, path=path)
    dot_git = root / ".git"
    try:
        # An agent writes these files (its worktree's .git names any folder): never
        # waited on if it makes one a FIFO.
        text = _git_file(dot_git) if dot_git.is_file() else ""
        if not text.startswith("gitdir:"):
            return Folder(key=root, path=path)
        gitdir = (root / text.removeprefix("gitdir:").strip()).resolve()
        common = (gitdir / _git_file(gitdir / "commondir")).resolve()
    except (OSError, UnsafeFile, UnicodeDecodeError):
        return Folder(key=root, path=path)
    if gitdir.parent != common / "worktrees":
        return Folder(key=root, path=path)
    return Folder(key=common.parent if common.name == ".git" else common, path=path)


def _source(
    env: Mapping[str, str],
    config: _Config,
    settings: list[_Settings | None],
    credentials: bytes | None,
    platform: str,
) -> tuple[str | None, str | None]:
    for flag in CLOUD_FLAGS:
        if _truthy(env.get(flag)):
            return f"{flag} (the cloud provider's credentials)", None
    if env.get("ANTHROPIC_AUTH_TOKEN"):
        return "ANTHROPIC_AUTH_TOKEN", None
    key = env.get("ANTHROPIC_API_KEY")
    if key:
        answers = config.customApiKeyResponses
        if approved_key_form(key) in answers.approved:
            return "ANTHROPIC_API_KEY", None
        if approved_key_form(key) not in answers.rejected:
            return "ANTHROPIC_API_KEY", "whether to use ANTHROPIC_API_KEY"
    if any(s is not None and s.apiKeyHelper for s in settings):
        return "apiKeyHelper (Claude Code settings)", None
    if env.get("CLAUDE_CODE_OAUTH_TOKEN"):
        return "CLAUDE_CODE_OAUTH_TOKEN", None
    stored = _decode(credentials, _Credentials)
    if stored is not None and stored.claudeAiOauth is not None and stored.claudeAiOauth.accessToken:
        return "the login stored by /login", None
    if config.primaryApiKey:
        return "the API key stored by /login", None
    # macOS keeps the login in the Keychain, which only `security` reads; the account
    # the global config records is the sign that a login was made.
    if platform == "darwin" and config.oauthAccount:
        return "the login in the macOS Keychain", None
    return None, None


class LoginReader:
    """`read_claude_login` for a long-lived office: each file is read again only when
    its stat changed, so checking on a cadence costs a few stat calls."""

    def __init__(self, platform: str = sys.platform) -> None:
        self.platform = platform
        self._files: dict[Path, tuple[tuple[int, int, int], bytes | None]] = {}
        # Decided answers by what they were decided from: a global config of a few MB
        # is parsed once per change, not once per desk and pass.
        self._answers: dict[object, ClaudeLogin] = {}

    def __call__(self, env: Mapping[str, str], folder: Path | None = None) -> ClaudeLogin:
        """`folder`: where the desk that asks starts, when its trust answer counts."""
        legacy = claude_places(env).settings[0].parent / ".config.json"
        places = claude_places(env, legacy_config_exists=self._read(legacy) is not None)
        files = {p: self._read(p) for p in (places.config, places.credentials, *places.settings)}
        where = None if folder is None else desk_folder(folder)
        stamps = tuple((p, self._files[p][0] if p in self._files else None) for p in files)
        key = (tuple(sorted((k, v) for k, v in env.items() if k in READ_VARS)), stamps, where)
        found = self._answers.get(key)
        if found is None:
            if len(self._answers) > ANSWERS_KEPT:
                self._answers.clear()
            found = self._answers[key] = claude_login(env, places, files, self.platform, where)
        return found

    def _read(self, path: Path) -> bytes | None:
        try:
            st = path.stat()
        except OSError:
            self._files.pop(path, None)
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._files.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        raw: bytes | None = None
        if st.st_size <= READ_MAX:
            try:
                # Same-user files an agent can replace with a FIFO: never waited on.
                raw = read_regular(path, READ_MAX, follow=True)
            except (OSError, UnsafeFile):
                raw = None
        self._files[path] = (stamp, raw)
        return raw


def read_claude_login(env: Mapping[str, str], folder: Path | None = None) -> ClaudeLogin:
    return LoginReader()(env, folder)


def desk_env(agent_env: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a local desk starts with, as far as its login goes: the office's
    own, then the roster's `env` (provider.office_env adds only the office's variables)."""
    return {**(os.environ if base is None else base), **agent_env}


def demo_command(home: Path) -> str:
    """How to open the demo from here: it takes $HIVE_HOME as its home, which it
    refuses when that is this office's."""
    if demo_home(None) != Path(home).absolute():
        return "hive-office --demo"
    return shlex.join(
        ["hive-office", "--home", str(Path(DEFAULT_DEMO_HOME).expanduser()), "--demo"]
    )


def office_sentence(login: ClaudeLogin, first: str, paths: HivePaths) -> str:
    """The one line the office shows while claude desks wait on `first`'s pane (the
    desk that starts to ask): what to do, and the ways around a login."""
    if login.source is None:
        return (
            f"No Claude login: log in once in {first}'s pane (/login; the other claude desks "
            f"follow), or try `{demo_command(paths.home)}`, or use shell desks "
            f'(provider = "shell" in {paths.office_toml}).'
        )
    return (
        f"Claude Code asks {login.asks} once, in {first}'s pane: answer it there and the "
        "other claude desks start by themselves."
    )


def waiting_notice(login: ClaudeLogin, first: str) -> str:
    """What a claude desk that waits for `first`'s pane shows in its own."""
    what = "a Claude login" if login.source is None else f"Claude Code's question ({login.asks})"
    return f"Waiting for {what} in {first}'s pane; this desk starts by itself after."


def codex_login(env: Mapping[str, str], stored: bool) -> str | None:
    """What a codex desk authenticates with: a key in its environment, or the login kept
    in its own CODEX_HOME (`stored`: that auth.json exists); None: it asks in its pane."""
    key = next((k for k in ("CODEX_API_KEY", "OPENAI_API_KEY") if env.get(k)), None)
    return key or ("the login in its CODEX_HOME" if stored else None)


GEMINI_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")


def gemini_login(env: Mapping[str, str], stored: bool) -> str | None:
    """What a gemini desk authenticates with: a key (or Vertex AI) in its environment,
    or the Google sign-in its desks share (`stored`: made in one desk's pane, kept under
    the office home, agents/gemini.py); None: it asks in its pane."""
    key = next((k for k in GEMINI_KEYS if env.get(k)), None)
    return key or ("the Google sign-in the office's gemini desks share" if stored else None)
