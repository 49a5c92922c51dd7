"""The toolbox: names, schemas, input validation wording, TodoWrite, summaries, doctests."""

from __future__ import annotations

import doctest
import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

from harness import TOOLS, Todo, TodoStatus, WorkspaceUnavailable, summarize_call, tool_specs
from harness.loop.events import TodosChanged
from harness.tools import background, diff, listing, ripgrep, toolbox, wakeup
from harness.tools import bash as bash_tool
from harness.tools import contract as tool
from harness.tools import search as search_tools
from tests.harness.tool_support import JailWorkspace, SessionDriver, error_text, open_store

CLAUDE_CODE_PARAMETERS = {
    "Bash": ["command", "timeout", "description", "run_in_background"],
    "Glob": ["pattern", "path"],
    "Grep": [
        "pattern",
        "path",
        "glob",
        "type",
        "output_mode",
        "-i",
        "-n",
        "-A",
        "-B",
        "-C",
        "context",
        "-o",
        "head_limit",
        "offset",
        "multiline",
    ],
    "Read": ["file_path", "offset", "limit", "pages", "allow_large"],
    "Edit": ["file_path", "old_string", "new_string", "replace_all"],
    "Write": ["file_path", "content"],
    "TodoWrite": ["todos"],
    "Skill": ["skill", "args"],
    "Monitor": ["description", "timeout_ms", "command", "ws"],
    "TaskStop": ["task_id", "shell_id"],
    "ScheduleWakeup": ["delaySeconds", "reason", "prompt", "stop", "noop"],
    "CronCreate": ["cron", "prompt", "recurring", "durable"],
    "CronList": [],
    "CronDelete": ["id"],
    "Agent": ["description", "prompt", "subagent_type", "run_in_background", "model", "effort"],
    "WebFetch": ["url", "prompt", "offset"],
}


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(tmp_path), org_id="T-REG")


def test_the_tools_have_claude_codes_names_and_parameter_names() -> None:
    specs = tool_specs()

    assert {s.name: list(s.input_schema["properties"]) for s in specs} == CLAUDE_CODE_PARAMETERS
    assert all(s.input_schema["additionalProperties"] is False for s in specs)
    assert all(len(s.description) > 100 for s in specs)


def test_each_schema_names_exactly_the_parameters_its_validator_accepts() -> None:
    for name, each in TOOLS.items():
        model = each.params  # type: ignore[attr-defined]  # every tool is a ModelTool
        accepted = [field.alias or key for key, field in model.model_fields.items()]
        schema = next(s for s in tool_specs() if s.name == name).input_schema
        assert accepted == list(schema["properties"]), name
        required = [f.alias or k for k, f in model.model_fields.items() if f.is_required()]
        assert required == schema["required"], name


def test_tool_specs_are_the_same_bytes_every_time() -> None:
    def dump() -> str:
        return json.dumps([s.to_dict() for s in tool_specs()])

    assert dump() == dump()


def test_edit_description_says_the_line_number_prefix_is_not_part_of_the_file() -> None:
    edit = next(s for s in tool_specs() if s.name == "Edit")

    assert "line-number prefix" in edit.description
    assert "is not part of the file" in edit.description


async def test_an_unknown_tool_is_an_error_result(agent: SessionDriver) -> None:
    outcome = await agent.call("Delete", {"file_path": "/memory/x"})

    assert (
        outcome.content == "<tool_use_error>Error: No such tool available: Delete</tool_use_error>"
    )
    assert outcome.is_error


async def test_a_missing_parameter_gets_claude_codes_input_validation_error(
    agent: SessionDriver,
) -> None:
    outcome = await agent.call("Read", {})

    assert error_text(outcome) == (
        "InputValidationError: Read failed due to the following issue:\n"
        "The required parameter `file_path` is missing"
    )


async def test_several_input_problems_are_listed_together(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Edit", {"file_path": 7, "old_string": "a", "replace_all": "maybe", "force": True}
    )

    assert error_text(outcome) == (  # missing parameters first, as Claude Code 2.1.336 lists them
        "InputValidationError: Edit failed due to the following issues:\n"
        "The required parameter `new_string` is missing\n"
        "The parameter `file_path` type is expected as `string` but provided as `number`\n"
        "The parameter `replace_all` type is expected as `boolean` but provided as `string`\n"
        "An unexpected parameter `force` was provided"
    )


async def test_grep_validation_uses_the_flag_names_the_model_sees(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Grep", {"pattern": "x", "-A": "three", "output_mode": "lines", "ignore_case": True}
    )

    assert error_text(outcome) == (
        "InputValidationError: Grep failed due to the following issues:\n"
        "The parameter `output_mode` is invalid: Invalid option: expected one of "
        '"content"|"files_with_matches"|"count"\n'
        "The parameter `-A` type is expected as `number` but provided as `string`\n"
        "An unexpected parameter `ignore_case` was provided"
    )


async def test_todo_write_replaces_the_list_and_reports_it_for_the_status_message(
    agent: SessionDriver,
) -> None:
    outcome = await agent.call(
        "TodoWrite",
        {
            "todos": [
                {"content": "Check pods", "status": "completed", "activeForm": "Checking pods"},
                {"content": "Read logs", "status": "in_progress", "activeForm": "Reading logs"},
                {"content": "Roll back", "status": "pending", "activeForm": "Rolling back"},
            ]
        },
    )

    assert outcome.content == (
        "Todos have been modified successfully. Ensure that you continue to use the todo list "
        "to track your progress. Please proceed with the current tasks if applicable"
    )
    assert outcome.todos == (
        Todo("Check pods", TodoStatus.COMPLETED, "Checking pods"),
        Todo("Read logs", TodoStatus.IN_PROGRESS, "Reading logs"),
        Todo("Roll back", TodoStatus.PENDING, "Rolling back"),
    )
    assert outcome.todos_event() == TodosChanged(
        todos=(
            ("completed", "Check pods", "Checking pods"),
            ("in_progress", "Read logs", "Reading logs"),
            ("pending", "Roll back", "Rolling back"),
        )
    )


async def test_todo_write_refuses_an_unknown_status(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "TodoWrite", {"todos": [{"content": "x", "status": "done", "activeForm": "x-ing"}]}
    )

    assert error_text(outcome) == (
        "InputValidationError: TodoWrite failed due to the following issue:\n"
        "The parameter `todos[0].status` is invalid: Invalid option: expected one of "
        '"pending"|"in_progress"|"completed"'
    )
    assert outcome.todos is None


async def test_validation_names_missing_parameters_first_as_claude_code_does(
    agent: SessionDriver,
) -> None:
    outcome = await agent.call("TodoWrite", {"todos": [{"content": "x", "status": "doing"}]})

    assert error_text(outcome) == (
        "InputValidationError: TodoWrite failed due to the following issues:\n"
        "The required parameter `todos[0].activeForm` is missing\n"
        "The parameter `todos[0].status` is invalid: Invalid option: expected one of "
        '"pending"|"in_progress"|"completed"'
    )


def test_summaries_are_short_lines_for_the_status_message() -> None:
    assert summarize_call("Read", {"file_path": "/memory/x.md"}) == "Read /memory/x.md"
    assert summarize_call("Bash", {"command": "kubectl get pods -A"}) == (
        "Bash: kubectl get pods -A"
    )
    assert summarize_call("Glob", {"pattern": "**/*.md", "path": "/memory"}) == (
        "Glob **/*.md in /memory"
    )
    assert summarize_call("TodoWrite", {"todos": [{}, {}]}) == "TodoWrite 2 items"
    assert summarize_call("TodoWrite", {"todos": [{}]}) == "TodoWrite 1 item"
    assert summarize_call("Bash", {"command": "x" * 200}) == "Bash: " + "x" * 79 + "…"
    assert summarize_call("Nope", {}) == "Nope"


@pytest.mark.parametrize(
    "module",
    [background, bash_tool, diff, listing, ripgrep, search_tools, tool, toolbox, wakeup],
    ids=str,
)
def test_module_doctests_pass(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0


class RefusingWorkspace(JailWorkspace):
    """A sandbox that cannot take files (full disk): the results cannot be kept."""

    async def write_file(self, path: str, data: bytes) -> None:
        raise WorkspaceUnavailable("no space left on device")


async def test_a_large_result_the_sandbox_cannot_keep_is_cut_and_says_so(tmp_path: Path) -> None:
    async with open_store(None, tmp_path) as store:
        agent = SessionDriver(store, RefusingWorkspace(tmp_path), org_id="T-REG")

        outcome = await agent.call("Bash", {"command": "printf 'a%.0s' $(seq 40000)"})

    assert len(outcome.content) < 31_000
    assert outcome.content.startswith("a" * 15_000 + "\n\n... [10000 characters cut] ...")
    assert outcome.content.endswith(
        "\n[The portion cut above was not kept: it could not be saved.]"
    )


def test_the_tracked_claude_code_release_is_the_one_the_docs_name() -> None:
    # docs/tools.md describes the surface of one release: moving the constant without the
    # docs (or the other way round) leaves one of them wrong
    from harness.tools.surface import CLAUDE_CODE_RELEASE, CLAUDE_CODE_RELEASE_DATE

    docs = (Path(__file__).resolve().parents[3] / "docs" / "tools.md").read_text()
    tracked = f"Tracked release: Claude Code {CLAUDE_CODE_RELEASE} ({CLAUDE_CODE_RELEASE_DATE})"
    assert tracked in docs
