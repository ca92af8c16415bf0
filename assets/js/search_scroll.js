(target) => {
  let t; try { t = JSON.parse(target || 'null'); } catch (e) { t = null; }
  if (!t || t.row === null || t.row === undefined) return [];
  const started = Date.now();
  const seek = () => {
    const chat = document.getElementById('ac-chat');
    const rows = chat ? chat.querySelectorAll('[data-testid=user], [data-testid=bot]') : [];
    if (rows.length > t.row) {
      const el = rows[t.row];
      document.querySelectorAll('#ac-chat .ac-hit').forEach((x) => x.classList.remove('ac-hit'));
      el.classList.add('ac-hit');
      el.scrollIntoView({block: 'center'});
      setTimeout(() => el.classList.remove('ac-hit'), __HIGHLIGHT_MS__);
      return;
    }
    if (Date.now() - started < 5000) setTimeout(seek, 100);
  };
  setTimeout(seek, 50);
  return [];
}
