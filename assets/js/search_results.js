element.addEventListener('click', (e) => {
  const row = e.target.closest('[data-hit]');
  if (!row) return;
  pick({index: Number(row.dataset.idx || -1), value: row.dataset.hit});
});
// One click on a hit on its way at a time, as in the session list (assets/js/session_list.js says
// why): a hit clicked meanwhile waits for the answer (the window event ac-hit-picked,
// signal_answered in webui/gui/search.py, says
// when), the last one clicked only. Its own event: the two lists never release each other's click.
let picking = false;
let next = null;
const pick = (hit) => {
  if (picking) { next = hit; return; }
  picking = true;
  trigger('select', hit);
};
window.addEventListener('ac-hit-picked', () => {
  picking = false;
  if (next === null) return;
  const hit = next;
  next = null;
  pick(hit);
});
