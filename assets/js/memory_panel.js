element.addEventListener('click', (e) => {
  const btn = e.target.closest('[data-do]');
  if (!btn) return;
  const item = btn.closest('[data-mid]');
  const d = {do: btn.dataset.do, id: item ? item.dataset.mid : '', sid: btn.dataset.sid || '', pk: btn.dataset.pk || ''};
  if (d.do === 'delete' && !window.confirm(btn.dataset.confirm || 'Delete?')) return;
  queue.push({index: 0, value: JSON.stringify(d)});
  send();
});
// One action on its way at a time, the others in order: Gradio dropped a click sent before the
// one before was answered ("once", its default for a select), so a second quick Delete left its
// memory and a second link opened the first one's chat. Every click counts here (each Delete is
// its own), so all are kept and sent one by one as each answer is drawn (the window
// event ac-memory-done: signal_answered in webui/gui/memory.py).
const queue = [];
let busy = false;
const send = () => {
  if (busy || !queue.length) return;
  busy = true;
  trigger('select', queue.shift());
};
window.addEventListener('ac-memory-done', () => { busy = false; send(); });
