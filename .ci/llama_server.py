"""Runs llama.cpp's own HTTP server (embedded in the xllamacpp wheel) on loopback.

Usage: python llama_server.py MODEL.gguf PORT

Fixed seed and temperature 0, so replies are reproducible. Runs until killed.
"""

import signal
import sys
import time

import xllamacpp as xlc

model, port = sys.argv[1], int(sys.argv[2])
params = xlc.CommonParams()
params.model.path = model
params.hostnames = ["127.0.0.1"]
params.port = port
params.n_ctx = 2048
params.n_predict = 256
params.n_parallel = 2
params.cpuparams.n_threads = 2
params.cpuparams_batch.n_threads = 2
params.sampling.seed = 42
params.sampling.temp = 0.0
params.sampling.top_k = 1
params.use_jinja = True
params.warmup = False

server = xlc.Server(params)
print(f"llama.cpp server listening on {server.listening_address}", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
