// One call of a web bundle's pipeline, the same in the page (app.js) and in Node (scripts/web_node.mjs):
// a text; [question, context] for question answering; [text, text_pair] for a pair classifier, which
// transformers.js's text-classification pipeline cannot take (it tokenizes single texts), so the
// pair is tokenized with `text_pair` and scored here as the pipeline scores a text (softmax, labels).
// A feature-extraction Tensor comes back as nested arrays (JSON for a driver).
export async function call(pipe, input, options = {}) {
  if (!Array.isArray(input)) return plain(await pipe(input, options));
  if (pipe.task !== 'text-classification') return plain(await pipe(...input, options));
  const inputs = pipe.tokenizer(input[0], { text_pair: input[1], padding: true, truncation: true });
  const logits = Array.from((await pipe.model(inputs)).logits.data);
  const top = Math.max(...logits);
  const exps = logits.map((x) => Math.exp(x - top));
  const sum = exps.reduce((a, b) => a + b, 0);
  const id2label = pipe.model.config.id2label;
  const scored = exps.map((e, i) => ({ label: id2label ? id2label[i] : `LABEL_${i}`, score: e / sum }))
    .sort((a, b) => b.score - a.score);
  return options.top_k === null ? scored : scored.slice(0, options.top_k ?? 1);
}

function plain(result) {
  return typeof result?.tolist === 'function' ? result.tolist() : result;
}
