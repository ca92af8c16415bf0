element.addEventListener('click', (e) => {
  const row = e.target.closest('[data-hit]');
  if (!row) return;
  trigger('select', {index: Number(row.dataset.idx || -1), value: row.dataset.hit});
});
