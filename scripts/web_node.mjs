// Runs a web bundle in Node with transformers.js (onnxruntime-node): the pipeline the bundle's
// labels.json (embedding.json) names, one call per input of INPUTS_JSON (a text, [question, context]
// or [text, text_pair]; OPTIONS_JSON), printed as one JSON line of {result, ms}, like web_drive.mjs in a browser.
//   node .web/web_node.mjs BUNDLE_PARENT BUNDLE_NAME INPUTS_JSON [OPTIONS_JSON]   (copied into .web/ so
//   imports resolve; OPTIONS_JSON: the pipeline's options, default {"top_k": null})
import { pipeline, env } from '@huggingface/transformers';
import { existsSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [parent, name, textsFile, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson ?? '{"top_k": null}');
env.allowRemoteModels = false;
env.localModelPath = parent;
const metaFile = ['labels.json', 'embedding.json'].find((f) => existsSync(`${parent}/${name}/${f}`));
const meta = JSON.parse(readFileSync(`${parent}/${name}/${metaFile}`, 'utf8'));
const model = await pipeline(meta.web.pipeline, name);  // no dtype: the bundle's config picks q8
// the bundle's own calls.mjs, as its page runs it: pairs, QA's two arguments, vectors as arrays
const { call } = await import(pathToFileURL(`${parent}/${name}/calls.mjs`).href);
const out = [];
for (const input of JSON.parse(readFileSync(textsFile, 'utf8'))) {
  const start = performance.now();
  const result = await call(model, input, options);
  out.push({ result, ms: performance.now() - start });
}
console.log(JSON.stringify(out));
