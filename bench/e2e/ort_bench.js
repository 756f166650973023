// node ort_bench.js MODEL.onnx INPUTS RUNS: ONNX Runtime (onnxruntime-node,
// CPU, 2 intra-op threads, all graph optimisations). INPUTS is one f32 .npy
// (the model's first input) or NAME=FILE.npy pairs joined by commas (every
// input; f32 or i64). Prints {"median_ms", "p10_ms", "p90_ms", "min_ms",
// "max_rel_error"}: the error of the first output against the sibling
// NAME.out.y.npy of the first input file, when present. NODE_PATH must reach
// onnxruntime-node.
const fs = require("fs");
const ort = require("onnxruntime-node");

function readNpy(path) {
  const buf = fs.readFileSync(path);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + headerLen);
  const i64 = header.includes("'<i8'");
  if (!header.includes("'<f4'") && !i64)
    throw new Error(`${path}: only little-endian f32 or i64 .npy files`);
  const shape = header.match(/\(([^)]*)\)/)[1].split(",").map((s) => s.trim()).filter((s) => s).map(Number);
  const start = 10 + headerLen;
  const bytes = buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length);
  return { shape, data: i64 ? new BigInt64Array(bytes) : new Float32Array(bytes), type: i64 ? "int64" : "float32" };
}

async function main() {
  const [model, inputPath, runsArg] = process.argv.slice(2);
  const runs = Number(runsArg || 20);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 2,
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
    executionMode: "sequential",
  });
  const pairs = inputPath.includes("=")
    ? inputPath.split(",").map((p) => p.split("="))
    : [[session.inputNames[0], inputPath]];
  const feeds = {};
  for (const [name, file] of pairs) {
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.type, t.data, t.shape);
  }
  const firstFile = pairs[0][1];
  let out = await session.run(feeds);
  for (let i = 0; i < 2; ++i) out = await session.run(feeds);
  const ms = [];
  for (let i = 0; i < runs; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const at = (q) => ms[Math.floor(q * (ms.length - 1))];
  const result = { median_ms: at(0.5), p10_ms: at(0.1), p90_ms: at(0.9), min_ms: ms[0], runs };
  const wantPath = firstFile.replace(/\.in\.[^.]+\.npy$/, ".out.y.npy");
  // Only an input file named NAME.in.X.npy has a sibling reference output.
  if (wantPath !== firstFile && fs.existsSync(wantPath)) {
    const want = readNpy(wantPath).data;
    const got = out[session.outputNames[0]].data;
    let maxAbs = 0, maxErr = 0;
    for (let i = 0; i < want.length; ++i) {
      maxAbs = Math.max(maxAbs, Math.abs(want[i]));
      maxErr = Math.max(maxErr, Math.abs(got[i] - want[i]));
    }
    result.max_rel_error = maxErr / maxAbs;
  }
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message}`);
  process.exit(1);
});
