// The sidebar's Agents section (webui/gui/agents.py): a click (or Enter) on an agent's row opens
// it read-only; the row's data-agent is the agent's name.
const pick = (e) => {
  const row = e.target.closest && e.target.closest('[data-agent]');
  if (!row) return;
  trigger('select', {index: 0, value: row.dataset.agent});
};
element.addEventListener('click', pick);
element.addEventListener('keydown', (e) => { if (e.key === 'Enter') pick(e); });

// "@" at the start of the message box offers the agents listed here (issue 30): typing narrows
// the list; a click, Tab or Enter completes "@name "; Escape closes it. The names are read from
// this section's rows, so the popup always matches what the sidebar lists.
if (!window.__acAgentPopup) {
  window.__acAgentPopup = true;
  const popup = document.createElement('div');
  popup.id = 'ac-agent-popup';
  popup.setAttribute('role', 'listbox');
  popup.hidden = true;
  document.body.appendChild(popup);
  let box = null;
  let choices = [];
  let at = 0;
  const names = () => Array.from(document.querySelectorAll('#ac-agents [data-agent]')).map((r) => r.dataset.agent);
  const close = () => { popup.hidden = true; choices = []; };
  const draw = () => {
    popup.replaceChildren(...choices.map((n, i) => {
      const item = document.createElement('div');
      item.className = 'ac-agent-choice' + (i === at ? ' active' : '');
      item.setAttribute('role', 'option');
      item.dataset.agent = n;
      item.textContent = '@' + n;
      return item;
    }));
    const r = box.getBoundingClientRect();
    popup.style.left = r.left + 'px';
    popup.style.bottom = (window.innerHeight - r.top + 4) + 'px';
    popup.hidden = choices.length === 0;
  };
  const complete = (name) => {
    const rest = box.value.replace(/^@[a-z0-9_-]*\s*/, '');
    box.value = '@' + name + ' ' + rest;
    box.dispatchEvent(new Event('input', {bubbles: true}));
    box.focus();
    close();
  };
  document.addEventListener('input', (e) => {
    const t = e.target;
    if (!(t instanceof HTMLTextAreaElement) || !t.closest('#ac-input')) return;
    box = t;
    const m = /^@([a-z0-9_-]*)$/.exec(t.value);
    choices = m ? names().filter((n) => n.startsWith(m[1])) : [];
    at = 0;
    draw();
  }, true);
  document.addEventListener('keydown', (e) => {
    if (popup.hidden || e.target !== box) return;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      at = (at + (e.key === 'ArrowDown' ? 1 : choices.length - 1)) % choices.length;
      draw();
    } else if (e.key === 'Tab' || (e.key === 'Enter' && !e.shiftKey)) {
      complete(choices[at]);
    } else if (e.key === 'Escape') {
      close();
    } else {
      return;
    }
    e.preventDefault();
    e.stopImmediatePropagation();
  }, true);
  popup.addEventListener('mousedown', (e) => {
    const item = e.target.closest('[data-agent]');
    if (item) { e.preventDefault(); complete(item.dataset.agent); }
  });
  document.addEventListener('focusout', (e) => { if (e.target === box) setTimeout(close, 150); });
}
