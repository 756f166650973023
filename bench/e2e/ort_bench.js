// node ort_bench.js MODEL.onnx INPUT.npy RUNS: ONNX Runtime (onnxruntime-node,
// CPU, 2 intra-op threads, all graph optimisations) on one f32 input; prints
// {"median_ms", "p10_ms", "p90_ms", "min_ms", "max_rel_error"} against INPUT's
// sibling NAME.out.y.npy when present. NODE_PATH must reach onnxruntime-node.
const fs = require("fs");
const ort = require("onnxruntime-node");

function readNpy(path) {
  const buf = fs.readFileSync(path);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + headerLen);
  if (!header.includes("'<f4'")) throw new Error(`${path}: only little-endian f32 .npy files`);
  const shape = header.match(/\(([^)]*)\)/)[1].split(",").map((s) => s.trim()).filter((s) => s).map(Number);
  const start = 10 + headerLen;
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return { shape, data };
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
  const x = readNpy(inputPath);
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", x.data, x.shape) };
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
  const wantPath = inputPath.replace(/\.in\.[^.]+\.npy$/, ".out.y.npy");
  if (fs.existsSync(wantPath)) {
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
