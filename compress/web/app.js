// The bundle's page: transformers.js and ONNX Runtime's wasm files are read from this folder
// (copied from the pinned npm package by scripts/web_runtime.sh), the model from this folder too.
import { pipeline, env } from './transformers.min.js';
import { call } from './calls.mjs';

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = new URL('./', import.meta.url).pathname.replace(/[^/]*\/$/, '');
env.backends.onnx.wasm.wasmPaths = new URL('./', import.meta.url).href;
// One wasm thread by default: for the kit's edge models it measured faster than two at every text
// length (docs/deploy.md). `?threads=N` in the page's address asks for N; more than one needs the page
// served cross-origin isolated (COOP/COEP headers), without which wasm runs on one thread anyway.
const asked = Number(new URLSearchParams(location.search).get('threads')) || 1;
env.backends.onnx.wasm.numThreads = globalThis.crossOriginIsolated ? asked : 1;
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
      const result = await call(model, input, options);
      out.push({ result, ms: performance.now() - start });
    }
    return out;
  },
};
const describe = (result) => {
  if ('{{PIPELINE}}' === 'feature-extraction') return `a ${result[0].length}-dimensional vector`;
  if (Array.isArray(result)) return result.map((r) => `${r.word ?? ''} ${r.label ?? r.entity} ${r.score.toFixed(3)}`).join('\n');
  return `${result.answer ?? result.label}  ${result.score.toFixed(3)}`;
};
button.textContent = 'run';
button.disabled = false;
button.onclick = async () => {
  const text = document.getElementById('text').value;
  // question answering reads "question? context" from the box: the first "?" ends the question
  const cut = text.indexOf('?');
  const input = '{{PIPELINE}}' === 'question-answering' && cut > 0 ? [text.slice(0, cut + 1), text.slice(cut + 1)] : text;
  const start = performance.now();
  const result = await call(model, input, {});
  const ms = performance.now() - start;
  out.textContent = `${describe(result)}  (${ms.toFixed(1)} ms)`;
};
