// The bundle's page: transformers.js and ONNX Runtime's wasm files are read from this folder
// (copied from the pinned npm package by scripts/web_runtime.sh), the model from this folder too.
import { pipeline, env } from './transformers.min.js';

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = new URL('./', import.meta.url).pathname.replace(/[^/]*\/$/, '');
env.backends.onnx.wasm.wasmPaths = new URL('./', import.meta.url).href;
// ONNX Runtime Web's default is half the cores; served cross-origin isolated (COOP/COEP headers) the
// page may use them all, as the Python bundle does. Without isolation wasm runs on one thread.
if (globalThis.crossOriginIsolated) env.backends.onnx.wasm.numThreads = navigator.hardwareConcurrency || 1;
const folder = new URL('./', import.meta.url).pathname.split('/').filter(Boolean).pop();

const button = document.getElementById('run');
const out = document.getElementById('out');
const model = await pipeline('{{PIPELINE}}', folder, { dtype: 'q8' });
// For a driver (tests/test_web_bundle.py's headless browser, a web team's own checks): the pipeline's
// output for each input, one call each, with its milliseconds.
window.shrinkbert = {
  run: async (inputs, options = {}) => {
    const out = [];
    for (const input of inputs) {
      const start = performance.now();
      const result = await model(input, options);
      out.push({ result, ms: performance.now() - start });
    }
    return out;
  },
};
button.textContent = 'run';
button.disabled = false;
button.onclick = async () => {
  const text = document.getElementById('text').value;
  const start = performance.now();
  const result = await model(text);
  const ms = performance.now() - start;
  const best = Array.isArray(result) ? result[0] : result;
  out.textContent = `${best.label}  ${best.score.toFixed(3)}  (${ms.toFixed(1)} ms)`;
};
