"""Skill: load one of the org's skills (``/skills/<name>/SKILL.md``) into the turn.

Claude Code's interface (2.1.332): parameters ``skill`` (the name in the listing)
and ``args`` (optional text); the result starts ``Launching skill: <name>`` and
carries the skill's instructions (the body after the YAML frontmatter) with the
skill's base directory, so the model can Read the skill's other files. An unknown
skill is a tool error. The load counts as a partial read of ``SKILL.md`` (enough
for Edit where the org lets the agent edit skills; Write still wants a full Read).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.loop.checkpoint import ReadRecord
from harness.tools import wording
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error
from harness.vfs import Mount, PathError, resolve
from memory_store import FileNotFound

SKILLS_ROOT = "/skills"
SKILL_FILE = "SKILL.md"


class SkillInput(BaseModel):
    """Skill's parameters (Claude Code's names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    skill: str = Field(min_length=1)
    args: str | None = None


def skill_name(raw: str) -> str:
    """The skill's folder name from what the model wrote (``/deploys``, ``deploys``).

    >>> skill_name("/deploys"), skill_name(" deploys ")
    ('deploys', 'deploys')
    """
    return raw.strip().lstrip("/").strip()


def body_of(content: str) -> str:
    """``content`` without its leading YAML frontmatter block (if it has one).

    >>> body_of("---\\nname: a\\n---\\n# A\\nstep\\n")
    '# A\\nstep\\n'
    >>> body_of("# no frontmatter\\n")
    '# no frontmatter\\n'
    """
    lines = content.removeprefix("\ufeff").split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        return content
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r") in ("---", "..."):
            return "\n".join(lines[i + 1 :]).lstrip("\n")
    return content


async def load_skill(p: SkillInput, ctx: ToolContext) -> ToolOutcome:
    """The skill's instructions, or an error naming the skills that exist."""
    name = skill_name(p.skill)
    shown = f"{SKILLS_ROOT}/{name}/{SKILL_FILE}"
    try:
        where = resolve(shown)
    except PathError:
        return tool_error(f"Unknown skill: {p.skill}")
    if where.mount is not Mount.SKILLS or "/" in name or not name:
        return tool_error(f"Unknown skill: {p.skill}")
    try:
        current = await ctx.store.read(ctx.namespace(Mount.SKILLS), where.path)
    except FileNotFound:
        return tool_error(f"Unknown skill: {name}. {await _known(ctx)}")
    except wording.MODEL_FIXABLE as exc:
        return tool_error(wording.store_failure(exc, where))
    body = f"Base directory for this skill: {SKILLS_ROOT}/{name}\n\n" + body_of(
        current.content
    ).rstrip("\n")
    if p.args:
        body += f"\n\nARGUMENTS: {p.args}"
    seen = ctx.read_state.get(shown)
    full = seen is not None and seen.full and seen.version == current.version
    record = ReadRecord(version=current.version, full=full, notified_version=current.version)
    # Claude Code 2.1.336: the result only says so; the instructions follow as a block of
    # their own in the same message
    return ToolOutcome(f"Launching skill: {name}", read_updates={shown: record}, follow_up=(body,))


async def _known(ctx: ToolContext) -> str:
    entries = await ctx.store.glob(ctx.namespace(Mount.SKILLS), f"*/{SKILL_FILE}", "/")
    names = sorted(e.path.strip("/").split("/", 1)[0] for e in entries)
    if not names:
        return "This org has no skills yet."
    return "Skills: " + ", ".join(names) + "."


SKILL = ModelTool(
    name="Skill",
    description=(
        "Load one of the org's skills (playbooks) into this conversation. The skills that "
        "exist are listed in the first message with what each is for; when one fits the "
        "task, call this with its name before doing the work it covers, then follow its "
        "instructions. The result holds the skill's instructions and its folder under "
        "/skills/, where any extra files it mentions can be Read. Only use names from the "
        "listing; a skill already loaded in this conversation need not be loaded again."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "skill": {
                "type": "string",
                "description": 'The skill\'s name as listed, e.g. "payments-outage".',
            },
            "args": {"type": "string", "description": "Optional text to give the skill."},
        },
        "required": ["skill"],
        "additionalProperties": False,
    },
    params=SkillInput,
    runner=load_skill,
)
