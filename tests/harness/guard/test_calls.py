"""What the guard's walk tells the approval policy: each program call as typed, the
environment it is given, and the paths the command writes."""

from __future__ import annotations

from harness.guard.calls import UNKNOWN, program_calls


def test_a_program_run_by_path_is_reported_with_the_path_it_was_typed_as() -> None:
    calls = program_calls("cp /usr/bin/kubectl /tmp/k; /tmp/k delete pod x; ls").calls
    assert [(c.name, c.path) for c in calls] == [("cp", ""), ("k", "/tmp/k"), ("ls", "")]


def test_the_variables_a_command_gives_a_program_are_reported_by_name() -> None:
    calls = program_calls("v=PA; v+=TH; printf -v $v /tmp; X=1 env Y=2 cat f").calls
    cat = calls[-1]
    assert cat.name == "cat"
    assert {"PATH", "X", "Y"} <= cat.environment
    assert "HOME" not in cat.environment  # unchanged
    assert "HOME" in program_calls("HOME=/tmp git log").calls[-1].environment


def test_env_and_sudo_take_any_name_without_an_equals_sign_before_the_command() -> None:
    # GNU env(1): NAME=VALUE words come first; bash imports BASH_FUNC_name%% as a function
    for wrapper in ("env", "sudo"):
        calls = program_calls(f"{wrapper} 'BASH_FUNC_ls%%=() {{ id; }}' bash -c ls").calls
        assert [c.name for c in calls] == [wrapper, "bash", "ls"]
        assert "BASH_FUNC_ls%%" in calls[1].environment


def test_the_paths_a_command_writes_are_reported_read_write_redirections_included() -> None:
    seen = program_calls("d=.ku; d+=be; echo x > ~/$d/config; cp a b; exec 3<>/dev/tcp/h/80")
    assert seen.written == ("/root/.kube/config", "b", "/dev/tcp/h/80")
    assert program_calls("cat < in.txt").written == ()


def test_xargs_with_an_input_the_walk_cannot_know_passes_arguments_only_known_when_it_runs() -> (
    None
):
    calls = program_calls("cat args.txt | xargs curl").calls
    assert (calls[-1].name, calls[-1].args) == ("curl", (UNKNOWN,))
    shell = program_calls("cat cmds | xargs -I{} sh -c '{}'").calls[2]
    assert (shell.name, shell.args) == ("sh", ("-c", UNKNOWN))
    known = program_calls("echo a b | xargs rm").calls[-1]
    assert known.args == ("a", "b")
