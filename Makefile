# The two commands of the README:
#   make run    builds oar and runs the main job: trains LeNet on Fashion-MNIST, reports accuracy
#   make test   builds everything and runs the test suite (every kernel test at the native ISA
#               and capped at avx2 and generic), then again under ASan+UBSan (native ISA; that
#               build leaves CUDA out, so the build without CUDA is tested too)
# Other targets: build, setup, bench, clean.

BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all setup build run test test-fast test-asan bench clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	# the recipe is lenet's defaults (tools/oar/train_recipe.c), printed at the start
	./$(BUILD)/oar train --model lenet --data fashion-mnist \
	    --checkpoint $(BUILD)/lenet.safetensors --metrics $(BUILD)/lenet-metrics.jsonl

test: test-fast test-asan

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: setup
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DOAR_SANITIZE=ON -DOAR_WITH_CUDA=OFF >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	# one ISA under the sanitizers: the release pass (test-fast) covers the capped runs
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -LE isa-capped

bench: build
	./$(BUILD)/oar bench --workload dispatch --json --compare-torch
	./$(BUILD)/oar bench --workload gemm --json

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
