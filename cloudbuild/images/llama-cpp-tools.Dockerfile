# gcr.io/$PROJECT_ID/llama-cpp-tools: the image of the IQ-ladder feeder's `convert` step
# (cloudbuild-iq-ladder.yaml; its imatrix step is `kaiju-tui imatrix`): huggingface-cli,
# python3 with /llama.cpp/convert_hf_to_gguf.py and its requirements, llama-imatrix (the
# imatrix's reference) and llama-quantize on the PATH, and the imatrix calibration text at
# /calib/calib.txt. Built by
# cloudbuild-images.yaml; the context is the repository root with calib/ added (see README).
#
# llama.cpp is the tree vendored in the PyPI sdist of llama-cpp-python 0.3.36, pinned by its
# sha256: the same sources scripts/compare-llama.sh builds and measures.
FROM python:3.11-slim-bookworm
ARG LLAMA_CPP_PYTHON=0.3.36
ARG LLAMA_CPP_PYTHON_SHA256=
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY cloudbuild/images/fetch-llama-cpp.py /tmp/fetch-llama-cpp.py
RUN python3 /tmp/fetch-llama-cpp.py "$LLAMA_CPP_PYTHON" "$LLAMA_CPP_PYTHON_SHA256" /llama.cpp
# portable (no -march=native: the image runs on whatever machine type the build gets) and
# static, so the two tools stand alone on the PATH
RUN cmake -S /llama.cpp -B /llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
      -DBUILD_SHARED_LIBS=OFF \
 && cmake --build /llama.cpp/build --target llama-imatrix llama-quantize -j"$(nproc)" \
 && cp /llama.cpp/build/bin/llama-imatrix /llama.cpp/build/bin/llama-quantize /usr/local/bin/
RUN pip install --no-cache-dir -r /llama.cpp/requirements/requirements-convert_hf_to_gguf.txt \
 && pip install --no-cache-dir "huggingface_hub[cli]<1"
COPY calib/calib.txt /calib/calib.txt
