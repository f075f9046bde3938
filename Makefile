# compilekit: `make help` lists the targets.
# Variables: VARIANT MODE SHAPE DTYPE DEVICE OUT FRESH TIMEOUT SET PASS GRAD WEIGHTS ALLOC RUN KERNEL EXPERIMENT GPUS FORCE DIR TEST_WORKERS
#            A B (make html-diff, compare) RAY BASELINE GATES FORMAT (make check)
# They reach the commands through the environment ("$$VARIANT"), never spliced into the shell
# line, so a quote or a space in a path cannot break the command.
PYTHON ?= python3
TEST_WORKERS ?= 2
VARIANT ?= naive
MODE ?= default
DEVICE ?= auto
OUT ?= runs
SHAPE ?=
DTYPE ?=
FRESH ?=
TIMEOUT ?= 1800
SET ?=
PASS ?=
GRAD ?=
WEIGHTS ?=
ALLOC ?=
RUN ?=
KERNEL ?=
EXPERIMENT ?= experiments/cpu_small.toml
GPUS ?=
FORCE ?=
DIR ?=
A ?=
B ?=
RAY ?=
BASELINE ?=
GATES ?=
FORMAT ?=
export VARIANT MODE DEVICE OUT SHAPE DTYPE FRESH TIMEOUT SET PASS GRAD WEIGHTS ALLOC RUN KERNEL EXPERIMENT GPUS FORCE DIR A B RAY BASELINE GATES FORMAT

# $(call need,VAR,example): a target's variable, named when empty (the command would see '')
need = @[ -n "$$$(1)" ] || { echo "make $@: give $(1)=$(2)" >&2; exit 2; }

.PHONY: help install test test-gpu experiment list kernels ops memory verify sweep compare check report html html-diff env

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

install:  ## install compilekit, test, plot, Ray and model deps, triton's interpreter (CPU torch 2.13 on CPU machines)
	$(PYTHON) -m pip install -q torch==2.13.0 || $(PYTHON) -m pip install -q torch
	$(PYTHON) -m pip install -q -e '.[dev,plot,ray,models]'
	@# Triton's interpreter runs triton-flash on the CPU; never replace a CUDA torch's own triton
	$(PYTHON) -c "import triton, numpy" 2>/dev/null || $(PYTHON) -m pip install -q triton numpy

test:  ## lint, then the CPU test suite (GPU tests skip with a reason)
	@$(PYTHON) -c "import xdist" 2>/dev/null || { echo "make test: pytest-xdist is not installed: run make install" >&2; exit 2; }
	$(PYTHON) -m ruff check compilekit variants tests
	@# Two workers, a test file each at a time (its module fixtures stay in one process): a
	@# test spends much of its time waiting on one child process, so one pytest process keeps
	@# only about one core busy. Each worker compiles under its own session cache.
	$(PYTHON) -m pytest -q -x -n $(TEST_WORKERS) --dist loadfile --durations=30 tests

test-gpu:  ## run only the GPU-marked tests (on a CUDA machine)
	$(PYTHON) -m pytest -q -m gpu tests

experiment:  ## one cell: VARIANT=naive (or hf:<checkpoint>) MODE=default [SHAPE=BxHxSxD, BxS a model, BxP+N a decode, LENGTHSxHxD a ragged batch, DTYPE= DEVICE=auto OUT=runs FRESH=1 TIMEOUT=s SET="k=v k2=v2" PASS=f.py:fn GRAD=off|no-grad|inference WEIGHTS=random ALLOC=expandable_segments:True]
	@$(PYTHON) -m compilekit run --variant "$$VARIANT" --mode "$$MODE" --device "$$DEVICE" \
	  --out "$$OUT" --timeout "$$TIMEOUT" $${SHAPE:+--shape "$$SHAPE"} \
	  $${DTYPE:+--dtype "$$DTYPE"} $${FRESH:+--fresh} $${GRAD:+--grad "$$GRAD"} \
	  $${WEIGHTS:+--weights "$$WEIGHTS"} $${ALLOC:+--alloc "$$ALLOC"} \
	  $$(for kv in $$SET; do echo "--set $$kv"; done) \
	  $$(for p in $$PASS; do echo "--pass $$p"; done)

list:  ## variants and modes, one line each
	@$(PYTHON) -m compilekit list

kernels:  ## kernel map of a run: RUN=runs/<cell> [KERNEL=name, or name#n where names repeat]
	$(call need,RUN,runs/<cell>)
	@$(PYTHON) -m compilekit kernels "$$RUN" $${KERNEL:+--kernel "$$KERNEL"}

ops:  ## op cost matrix of a run: RUN=runs/<cell> [BY=time|memory] [KIND=op|kernel]
	$(call need,RUN,runs/<cell>)
	@$(PYTHON) -m compilekit ops "$$RUN" --by "$${BY:-time}" $${KIND:+--kind "$$KIND"}

memory:  ## a CUDA run's allocator figures and one forward's memory timeline: RUN=runs/<cell>
	$(call need,RUN,runs/<cell>)
	@$(PYTHON) -m compilekit memory "$$RUN"

verify:  ## re-time RUN=runs/<cell> with a bare do_bench / perf_counter in fresh processes
	$(call need,RUN,runs/<cell>)
	@$(PYTHON) -m compilekit verify "$$RUN"

sweep:  ## every cell of EXPERIMENT=experiments/x.toml [OUT=dir GPUS=0,1 FORCE=1 RAY=auto|host:port], resumable
	@$(PYTHON) -m compilekit sweep "$$EXPERIMENT" $$( [ "$$OUT" = runs ] || echo --out "$$OUT") \
	  $${GPUS:+--gpus "$$GPUS"} $${FORCE:+--force} $${FRESH:+--fresh} $${RAY:+--ray "$$RAY"}

compare:  ## each cell's time ratio and verdict, and its compile contract: A=base B=new (runs, sweeps or published folders) [FORMAT=markdown|json]
	$(call need,A,runs/<experiment> or a published folder)
	$(call need,B,runs/<experiment>)
	@$(PYTHON) -m compilekit compare "$$A" "$$B" $${FORMAT:+--format "$$FORMAT"}

check:  ## run EXPERIMENT and gate it against BASELINE=dir: exit 1 on a regression [GATES="--max-slowdown 5% --max-graph-breaks 0 --no-new-kernels" OUT=dir FORMAT=]
	$(call need,BASELINE,experiments/results/cpu/cpu_small)
	@$(PYTHON) -m compilekit check "$$EXPERIMENT" --baseline "$$BASELINE" \
	  $$( [ "$$OUT" = runs ] || echo --out "$$OUT") $${FORMAT:+--format "$$FORMAT"} $$GATES

report:  ## REPORT.md, table and plots of a sweep: DIR=runs/<experiment>
	$(call need,DIR,runs/<experiment>)
	@$(PYTHON) -m compilekit report "$$DIR"

html:  ## the HTML page of a run or sweep: DIR=runs/<cell> or runs/<experiment> (writes its index.html)
	$(call need,DIR,runs/<cell> or runs/<experiment>)
	@$(PYTHON) -m compilekit html "$$DIR"

html-diff:  ## an HTML diff of two runs: A=runs/<cell> B=runs/<cell> [OUT=file.html]
	$(call need,A,runs/<cell>)
	$(call need,B,runs/<cell>)
	@$(PYTHON) -m compilekit html --diff "$$A" "$$B" $$( [ "$$OUT" = runs ] || echo --out "$$OUT")

env:  ## versions and the device's measured ceilings (cached)
	@$(PYTHON) -m compilekit env
