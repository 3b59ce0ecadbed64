# gcr.io/$PROJECT_ID/kaiju-tui: the image of the KAIJU encode build's `encode` and `gate` steps
# (cloudbuild-kaiju-encode.yaml) and the IQ-ladder feeder's `imatrix` step
# (cloudbuild-iq-ladder.yaml): kaiju-tui on Debian slim, bash for the gate step, and the
# perplexity text at /calib/ppl.txt. Built by cloudbuild-images.yaml; the build context is the
# repository root with the campaign's calibration texts added under calib/ (see the README).
ARG RUST_IMAGE=rust:1.95-slim-bookworm
FROM ${RUST_IMAGE} AS build
WORKDIR /src
# the repository (less what .dockerignore leaves out): the crate embeds files from assets/,
# themes/, qspecs/, scripts/ and cloudbuild/
COPY . .
# x86-64-v3 (AVX2, FMA, BMI1/2; every Cloud Build machine type has it): the whole program
# compiled for it encodes faster than the portable build, which picks its AVX2 paths at run
# time. Never target-cpu=native or x86-64-v4: AVX-512 code generation made the codec 1.4 to
# 2.3 times slower on Zen 4 (docs/BENCHMARKS.md).
ENV RUSTFLAGS="-C target-cpu=x86-64-v3"
RUN cargo build --release --locked --bin kaiju-tui

FROM debian:bookworm-slim
COPY --from=build /src/target/release/kaiju-tui /usr/local/bin/kaiju-tui
COPY calib/ppl.txt /calib/ppl.txt
# the calibration text of the feeder's imatrix and of the encoder's error feedback
# (--calib-text), as the llama-cpp-tools image has it
COPY calib/calib.txt /calib/calib.txt
ENTRYPOINT ["kaiju-tui"]
