"""Who an agent is, in words: identity.md and the system prompt it starts with."""

from __future__ import annotations

from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, OfficeConfig

# The part of PROTOCOL.md an agent must know before it reads anything; the rest is in
# the file, which the prompt points to.
PROTOCOL_DIGEST = """\
How this office works (full text: {protocol}):
- You talk to teammates only through mail, with the `hive` command; never write JSON or
  run git in the hive, the office does that.
- `hive inbox` lists unread mail; `hive read ID` shows one; `hive reply ID --body ...`
  answers; `hive done ID` marks it handled (after you acted on it).
- `hive send --to ID|god|human|broadcast --act request|query|propose|inform|done
  --subject ... --body ...`. request/query/propose expect a reply; inform/done end a
  thread, so do not reply to them.
- `hive board` shows the shared plan (only the manager writes it); `hive triage "..."`
  files a request for the manager; `hive task done ID --result ...` reports a task.
- Write only inside your own folder {folder}; never edit another agent's folder.
- When the office tells you that you have unread mail, run `hive inbox` and deal with it.
"""


def identity_text(agent: AgentSpec, config: OfficeConfig) -> str:
    manager = agent.id == config.office.manager
    others = [a for a in config.agents if a.id != agent.id and not a.archived]
    team = "\n".join(
        f"- {a.name} (`{a.id}`): {a.role or 'no role given'}"
        + (" (manager)" if a.id == config.office.manager else "")
        + (" (has web access)" if a.web else "")
        for a in others
    )
    lines = [
        f"# {agent.name}",
        "",
        f"You are {agent.name}, id `{agent.id}`, in the office {config.office.name}.",
        f"Your role: {agent.role or 'not given'}.",
    ]
    if manager:
        lines.append(
            "You are the manager: you run the floor, keep the board and the task ledger, "
            "answer routine questions yourself and bring the person in only for what they "
            "must decide."
        )
    if agent.web:
        lines.append(
            "You have web access (WebFetch, WebSearch); teammates ask you to look things up."
        )
    else:
        lines.append("You have no web tools; ask a teammate with web access if you need the web.")
    lines += ["", "## Your team", team or "- nobody else yet", ""]
    return "\n".join(lines)


# A remote desk's host has none of the office's files: the paths above would name
# nothing there, so its prompt points at `hive` verbs instead.
REMOTE_PLACES = """You run on {host}, another machine than the office's: the office's files are not here.
`hive` reaches the office from here for everything (mail, board, tasks, memory).
"""


def system_prompt(agent: AgentSpec, config: OfficeConfig, paths: HivePaths) -> str:
    folder = paths.mailbox(agent.id).root
    if agent.host:
        places = PROTOCOL_DIGEST.format(
            protocol="the office's PROTOCOL.md",
            folder="in the office (not on this machine; `hive memory note` keeps notes)",
        ) + REMOTE_PLACES.format(host=agent.host)
        memory = "\nSearch your long-term memory with `hive memory search WORDS --scope own`.\n"
    else:
        places = PROTOCOL_DIGEST.format(protocol=paths.protocol, folder=f"{folder}/")
        memory = (
            f"\nYour long-term memory index is {paths.mailbox(agent.id).memory}; "
            "read it when you start.\n"
        )
    prompt = identity_text(agent, config) + "\n" + places + memory
    if agent.id == config.office.manager:
        # The policy is the person's to edit (hive/MANAGER.md), so it is read at every start.
        try:
            policy = paths.manager_policy.read_text(encoding="utf-8")
        except FileNotFoundError:
            policy = ""
        prompt += f"\n{policy}" if policy else ""
    return prompt
