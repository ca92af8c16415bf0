() => {
  const chat = document.getElementById('ac-chat');
  if (!chat) return [];
  chat.classList.add('ac-menu-closed');
  const reopen = (e) => {
    if (e.target.closest && e.target.closest('#ac-chat .extra-feedback')) return;
    chat.classList.remove('ac-menu-closed');
    document.removeEventListener('mouseover', reopen, true);
  };
  document.addEventListener('mouseover', reopen, true);
  return [];
}
