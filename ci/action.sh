#!/usr/bin/env bash
# The logic of the GitHub Action (action.yml at the repository root), one phase per step:
#
#   ci/action.sh install   a virtualenv in $RUNNER_TEMP with corral: from the action's own checkout
#                          ($GITHUB_ACTION_PATH, the ref named in `uses:`), or corral==$INPUT_VERSION from the
#                          package index; writes `corral=PATH` to $GITHUB_OUTPUT.
#   ci/action.sh check     one `corral check` run writing every report asked for: annotations (`github`) or
#                          text on stdout, SARIF to $INPUT_SARIF, the markdown summary appended to
#                          $GITHUB_STEP_SUMMARY; writes `exit-code` (and `sarif-file`, absolute, when written)
#                          to $GITHUB_OUTPUT and exits with corral's code (0 clean, 1 findings, 2 an error).
#
# Inputs come as the environment action.yml sets: $CORRAL (the command), $INPUT_PATHS and $INPUT_ARGS
# (whitespace-separated), $INPUT_ANNOTATIONS and $INPUT_SUMMARY (true/false), $INPUT_SARIF (a file, or empty).
set -uo pipefail

fail() {
  echo "corral action: $*" >&2
  exit 2
}

output() {  # output NAME VALUE: a step output, or stdout when run outside Actions
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "$1=$2" >>"$GITHUB_OUTPUT" || fail "cannot write the step output to $GITHUB_OUTPUT"
  else
    echo "$1=$2"
  fi
}

install() {
  local venv="${RUNNER_TEMP:?RUNNER_TEMP is not set}/corral-venv" source
  if [ -n "${INPUT_VERSION:-}" ]; then
    source="corral==${INPUT_VERSION}"
  else
    source="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set}"
  fi
  # corral's own virtualenv: the project's environment and its dependencies stay as they are.
  "${INPUT_PYTHON:-python3}" -m venv "$venv" || fail "cannot create a virtualenv in $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$source" || fail "pip could not install $source"
  "$venv/bin/corral" --version || fail "the installed corral does not run"
  output corral "$venv/bin/corral"
}

check() {
  local corral="${CORRAL:?CORRAL (the corral command) is not set}" summary="" status sarif="${INPUT_SARIF:-}"
  local -a reports=() args=() paths=()
  if [ "${INPUT_ANNOTATIONS:-true}" = true ]; then
    reports+=(--format github)
  else
    reports+=(--format text)
  fi
  if [ -n "$sarif" ]; then
    case $sarif in /*) ;; *) sarif="$PWD/$sarif" ;; esac  # upload-sarif resolves paths from the workspace
    rm -f "$sarif"  # a stale report from an earlier run is never uploaded as this one's
    reports+=(--format sarif --output-file "$sarif")
  fi
  if [ "${INPUT_SUMMARY:-true}" = true ]; then
    [ -n "${GITHUB_STEP_SUMMARY:-}" ] || fail "summary is on but \$GITHUB_STEP_SUMMARY is not set"
    summary=$(mktemp) || fail "cannot make a temporary file for the summary"
    reports+=(--format markdown --output-file "$summary")
  fi
  read -r -d "" -a args <<<"${INPUT_ARGS:-}"  # across lines too: a YAML block lists one per line
  read -r -d "" -a paths <<<"${INPUT_PATHS:-}"
  "$corral" check "${reports[@]}" "${args[@]}" "${paths[@]}"
  status=$?
  # The summary is appended (earlier steps may have written theirs); one that cannot be fails the step.
  if [ -n "$summary" ]; then
    if [ -s "$summary" ] && ! cat "$summary" >>"$GITHUB_STEP_SUMMARY"; then
      echo "corral action: cannot append the summary to $GITHUB_STEP_SUMMARY" >&2
      status=2
    fi
    rm -f "$summary"
  fi
  output exit-code "$status"
  if [ -n "$sarif" ] && [ -s "$sarif" ]; then
    output sarif-file "$sarif"
  fi
  exit "$status"
}

case "${1:-}" in
  install) install ;;
  check) check ;;
  *) fail "usage: ci/action.sh install|check" ;;
esac
