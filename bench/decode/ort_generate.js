// node ort_generate.js DIR STEPS: the generation loop of
// examples/llama_generate over ONNX Runtime (onnxruntime-node, CPU, 2
// intra-op threads, all graph optimisations), on the graphs
// export_llama.py wrote to DIR: the prompt (prefill.onnx), then STEPS
// greedy tokens, each decode step fed the previous step's present K/V as
// its past (ONNX Runtime's Concat copies the cache every step). A first
// run of each session is untimed, as in the fusetune example. Prints
// {"prompt_tokens", "prefill_ms", "prompt_tokens_per_s", "steps",
// "decode_ms", "decode_tokens_per_s", "tokens", "tokens_match_torch"}.
// NODE_PATH must reach onnxruntime-node.
const fs = require("fs");
const path = require("path");
const ort = require("onnxruntime-node");

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + headerLen);
  const i64 = header.includes("'<i8'");
  const shape = header.match(/\(([^)]*)\)/)[1].split(",").map((s) => s.trim()).filter((s) => s).map(Number);
  const bytes = buf.buffer.slice(buf.byteOffset + 10 + headerLen, buf.byteOffset + buf.length);
  return { shape, data: i64 ? new BigInt64Array(bytes) : new Float32Array(bytes) };
}

function argmaxLast(logits) {
  const vocab = logits.dims[logits.dims.length - 1];
  const data = logits.data, start = data.length - vocab;
  let best = 0;
  for (let v = 1; v < vocab; ++v) if (data[start + v] > data[start + best]) best = v;
  return best;
}

async function main() {
  const [dir, stepsArg] = process.argv.slice(2);
  const steps = Number(stepsArg || 32);
  const options = { intraOpNumThreads: 2, interOpNumThreads: 1, graphOptimizationLevel: "all",
                    executionMode: "sequential" };
  const prefill = await ort.InferenceSession.create(path.join(dir, "prefill.onnx"), options);
  const decode = await ort.InferenceSession.create(path.join(dir, "decode.onnx"), options);
  const prompt = readNpy(path.join(dir, "prompt.npy"));
  const ids = new ort.Tensor("int64", prompt.data, prompt.shape);
  await prefill.run({ ids });  // untimed first run
  let t0 = process.hrtime.bigint();
  let out = await prefill.run({ ids });
  const prefillMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const promptLen = prompt.shape[1];

  const step = async (out, token, pos) => {
    const feeds = { ids: new ort.Tensor("int64", BigInt64Array.from([BigInt(token)]), [1, 1]),
                    pos: new ort.Tensor("int64", BigInt64Array.from([BigInt(pos)]), [1]) };
    for (const name of decode.inputNames)
      if (name.startsWith("past_")) feeds[name] = out["present_" + name.slice(5)];
    return decode.run(feeds);
  };
  await step(out, argmaxLast(out.logits), promptLen);  // untimed first run
  const tokens = [];
  t0 = process.hrtime.bigint();
  for (let i = 0; i < steps; ++i) {
    const token = argmaxLast(out.logits);
    tokens.push(token);
    out = await step(out, token, promptLen + i);
  }
  const decodeMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const torch = readNpy(path.join(dir, "torch_tokens.npy")).data;
  let match = true;
  for (let i = 0; i < Math.min(torch.length, tokens.length); ++i) match &&= BigInt(tokens[i]) === torch[i];
  console.log(JSON.stringify({
    prompt_tokens: promptLen, prefill_ms: prefillMs, prompt_tokens_per_s: promptLen / (prefillMs / 1e3),
    steps, decode_ms: decodeMs, decode_tokens_per_s: steps / (decodeMs / 1e3), tokens,
    tokens_match_torch: match,
  }));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
