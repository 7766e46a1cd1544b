"""Shell completion scripts for bash and zsh, generated from the argument parser.

    eval "$(virtctl-py completion bash)"        # or: source <(virtctl-py completion zsh)

Both offer the verbs, then the flags of the verb being typed (kubectl's connection flags
included), `vm`/`vmi` where a verb takes a kind, and `vm` after `create`.
"""

from __future__ import annotations

import argparse

KIND_VERBS = ("pause", "unpause", "expose")


def verb_flags(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Every verb and its long flags, in parser order."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, list[str]] = {}
    for verb, p in sub.choices.items():
        flags = [o for a in _all_actions(p) for o in a.option_strings if o.startswith("--")]
        out[verb] = list(dict.fromkeys(flags))
    return out


def _all_actions(p: argparse.ArgumentParser) -> list[argparse.Action]:
    actions = list(p._actions)
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for child in a.choices.values():
                actions += _all_actions(child)
    return actions


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    flags = verb_flags(parser)
    return bash(flags) if shell == "bash" else zsh(flags)


def bash(flags: dict[str, list[str]]) -> str:
    cases = "\n".join(f'    {verb}) flags="{" ".join(f)}" ;;' for verb, f in flags.items())
    kinds = "|".join(KIND_VERBS)
    return f"""# virtctl-py bash completion: eval "$(virtctl-py completion bash)"
_virtctl_py() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} verb="" flags="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${{COMP_WORDS[i]}}" in -*) ;; *) verb=${{COMP_WORDS[i]}}; break ;; esac
  done
  if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "{" ".join(flags)}" -- "$cur")); return; fi
  case "$verb" in
{cases}
  esac
  if [[ "$cur" != -* ]]; then
    case "$verb" in
      {kinds}) [ "$i" -eq $((COMP_CWORD - 1)) ] && flags="vm vmi" ;;
      create) [ "$i" -eq $((COMP_CWORD - 1)) ] && flags="vm" ;;
      completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return ;;
    esac
  fi
  COMPREPLY=($(compgen -W "$flags" -- "$cur"))
}}
complete -F _virtctl_py virtctl-py kubectl-virt
"""


def zsh(flags: dict[str, list[str]]) -> str:
    cases = "\n".join(f"    {verb}) flags=({' '.join(f)}) ;;" for verb, f in flags.items())
    kinds = "|".join(KIND_VERBS)
    return f"""#compdef virtctl-py kubectl-virt
# virtctl-py zsh completion: source <(virtctl-py completion zsh)
_virtctl_py() {{
  local -a verbs flags
  local verb="" i
  verbs=({" ".join(flags)})
  for ((i = 2; i < CURRENT; i++)); do
    [[ $words[i] != -* ]] && {{ verb=$words[i]; break }}
  done
  if [[ -z $verb ]]; then compadd -a verbs; return; fi
  case $verb in
{cases}
  esac
  if [[ $PREFIX != -* ]]; then
    case $verb in
      {kinds}) (( i == CURRENT - 1 )) && {{ compadd vm vmi; return }} ;;
      create) (( i == CURRENT - 1 )) && {{ compadd vm; return }} ;;
      completion) compadd bash zsh; return ;;
    esac
  fi
  compadd -a flags
}}
compdef _virtctl_py virtctl-py kubectl-virt
"""
