// Runs a web bundle in Node with transformers.js (onnxruntime-node): the pipeline the bundle's
// labels.json names, one call per text of TEXTS_JSON (top_k null), printed as one JSON line of
// {result, ms}, like web_drive.mjs does in a browser.
//   node .web/web_node.mjs BUNDLE_PARENT BUNDLE_NAME TEXTS_JSON   (copied into .web/ so imports resolve)
import { pipeline, env } from '@huggingface/transformers';
import { readFileSync } from 'node:fs';
const [parent, name, textsFile] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = parent;
const meta = JSON.parse(readFileSync(`${parent}/${name}/labels.json`, 'utf8'));
const model = await pipeline(meta.web.pipeline, name);  // no dtype: the bundle's config picks q8
const out = [];
for (const text of JSON.parse(readFileSync(textsFile, 'utf8'))) {
  const start = performance.now();
  const result = await model(text, { top_k: null });
  out.push({ result, ms: performance.now() - start });
}
console.log(JSON.stringify(out));
